"""Sample GPU 0's SM clock, its power (NVML's instantaneous reading and its averaged one) and its
clock-event reasons every few milliseconds into a CSV, until stopped (SIGTERM or SIGINT) or
``--max-s`` has passed: what the power cap does at the time scale of the serving loop's passes
(nvidia-smi's `power.draw` is a one-second average, too slow to see a 10 ms prefill). Runs on the
GPU machine with the image's nvidia-ml-py (device call 95, calibrate/runs/h200-call95.sh):

    python3 calibrate/runs/power_sampler.py --out FILE.csv [--period-ms 5] [--max-s 300] &

Columns: t_unix_s (time.time() at the sample), sm_mhz, power_instant_w (NVML field
NVML_FI_DEV_POWER_INSTANT; empty where the driver has none), power_avg_w
(nvmlDeviceGetPowerUsage), reasons (the clock-event reasons bit mask, hex; 0x4 is the SW power
cap). Lines are flushed every second, so a killed sampler loses at most that.
"""

from __future__ import annotations

import argparse
import signal
import time


def main() -> None:
    import pynvml as nv

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--period-ms", type=float, default=5.0)
    p.add_argument("--max-s", type=float, default=300.0)
    a = p.parse_args()
    nv.nvmlInit()
    gpu = nv.nvmlDeviceGetHandleByIndex(0)
    instant_field = getattr(nv, "NVML_FI_DEV_POWER_INSTANT", 186)
    reasons_of = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
        nv.nvmlDeviceGetCurrentClocksThrottleReasons
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    period_s, end = a.period_ms / 1e3, time.time() + a.max_s
    with open(a.out, "w", encoding="utf-8") as f:
        f.write("t_unix_s,sm_mhz,power_instant_w,power_avg_w,reasons\n")
        flushed = time.time()
        while not stop and time.time() < end:
            t = time.time()
            try:
                value = nv.nvmlDeviceGetFieldValues(gpu, [instant_field])[0]
                instant = f"{value.value.uiVal / 1e3:.2f}" if value.nvmlReturn == 0 else ""
            except Exception:  # noqa: BLE001 - a driver without the field: leave the column empty
                instant = ""
            sm = nv.nvmlDeviceGetClockInfo(gpu, nv.NVML_CLOCK_SM)
            avg = nv.nvmlDeviceGetPowerUsage(gpu) / 1e3
            f.write(f"{t:.4f},{sm},{instant},{avg:.2f},{reasons_of(gpu):#x}\n")
            if t - flushed > 1.0:
                f.flush()
                flushed = t
            time.sleep(max(0.0, period_s - (time.time() - t)))
    nv.nvmlShutdown()


if __name__ == "__main__":
    main()
