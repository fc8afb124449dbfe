#!/usr/bin/env python3
"""One bounded wrk run; prints one JSON line with req/s, latency percentiles and CPU per request.
usage: measure.py NAME ROUND URL LUA DURATION SERVER_PIDS(comma) UPSTREAM_PIDS(comma)
CPU of a process = utime+stime from /proc/PID/stat (all its threads), delta over the run."""
import json, os, re, resource, subprocess, sys, time

name, rnd, url, lua, duration, spids, upids = sys.argv[1:8]
HZ = os.sysconf("SC_CLK_TCK")

def ticks(pids):
    t = 0
    for p in filter(None, pids.split(",")):
        with open(f"/proc/{p}/stat") as f:
            fl = f.read().rsplit(")", 1)[1].split()
        t += int(fl[11]) + int(fl[12])
    return t

def machine_busy():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return sum(v) - v[3] - v[4]

def ms(v):
    m = re.match(r"([0-9.]+)(us|ms|s)$", v)
    return float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]

s0, u0, b0 = ticks(spids), ticks(upids), machine_busy()
r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
t0 = time.monotonic()
out = subprocess.run(["wrk", "-t2", "-c64", f"-d{duration}", "--latency", "-s", lua, url],
                     capture_output=True, text=True, timeout=120)
el = time.monotonic() - t0
s1, u1, b1 = ticks(spids), ticks(upids), machine_busy()
r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
o = out.stdout
if out.returncode != 0:
    sys.exit(f"wrk failed: {out.stderr}{o}")
reqs = int(re.search(r"(\d+) requests in", o).group(1))
rps = float(re.search(r"Requests/sec:\s+([0-9.]+)", o).group(1))
lat = {p: ms(v) for p, v in re.findall(r"^\s+(50|99)%\s+(\S+)", o, re.M)}
non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", o)
errs = re.search(r"Socket errors: (.*)", o)
wrk_s = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
srv_s, up_s = (s1 - s0) / HZ, (u1 - u0) / HZ
busy_s = (b1 - b0) / HZ
print(json.dumps({
    "name": name, "round": int(rnd), "rps": rps, "requests": reqs,
    "p50": lat["50"], "p99": lat["99"],
    "non2xx": int(non2xx.group(1)) if non2xx else 0, "errors": errs.group(1) if errs else "",
    "srv_us": srv_s * 1e6 / reqs, "up_us": up_s * 1e6 / reqs, "wrk_us": wrk_s * 1e6 / reqs,
    "other_us": max(0.0, busy_s - srv_s - up_s - wrk_s) * 1e6 / reqs,
    "srv_cores": srv_s / el, "elapsed": el,
}), flush=True)
print(f"round {rnd} {name:20s} {rps:8.0f} req/s p50 {lat['50']:.3f} p99 {lat['99']:.3f} ms  server {srv_s*1e6/reqs:.1f} us/req"
      f" ({srv_s/el:.2f} cores)  upstream {up_s*1e6/reqs:.1f}  wrk {wrk_s*1e6/reqs:.1f}"
      f"  other {max(0.0, busy_s-srv_s-up_s-wrk_s)*1e6/reqs:.1f}  non2xx {non2xx.group(1) if non2xx else 0} {errs.group(1) if errs else ''}",
      file=sys.stderr, flush=True)
