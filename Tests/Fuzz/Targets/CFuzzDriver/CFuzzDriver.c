#include <stddef.h>
#include <stdint.h>

#include "CFuzzDriver.h"

// Both come from the fuzz target: libFuzzer's driver (libclang_rt.fuzzer) and the target's callback.
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int mg_fuzz_main(int argc, char **argv) {
    return LLVMFuzzerRunDriver(&argc, &argv, LLVMFuzzerTestOneInput);
}
