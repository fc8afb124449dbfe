// The entry point of a fuzz executable. SwiftPM links every executable target with `main` defined as
// `<Target>_main`, so libFuzzer's own main is never linked; each target's `<Target>_main` calls this, which
// runs libFuzzer's driver on the target's LLVMFuzzerTestOneInput.
#ifndef CFUZZDRIVER_H
#define CFUZZDRIVER_H

int mg_fuzz_main(int argc, char **argv);

#endif
