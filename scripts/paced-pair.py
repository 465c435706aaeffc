#!/usr/bin/env python3
"""CPU per request of two extenders under kube-scheduler's pace, side by side.

kube-scheduler calls an extender one request at a time with its own work in
between, so each request finds the server asleep; `floor pair` sends its
requests back to back and never shows what waking costs. This sends rounds of
N sequential keep-alive POSTs, GAP_MS apart, alternating between A and B, and
reads each server's CPU time (the sum of its threads' /proc schedstat) and
context switches around every round.

    scripts/paced-pair.py PID_A URL_A PID_B URL_B BODY VERB [N] [ROUNDS] [GAP_MS]

(defaults 200 requests, 20 rounds, 3 ms). Prints the medians per request and
the median of the per-round A/B CPU ratios with their range, then each side's
client-side latency (p50, p99) and the median of the per-round p50 ratios.
Loopback only.
"""
import http.client
import os
import statistics
import sys
import time
import urllib.parse


def cpu_and_switches(pid):
    """CPU nanoseconds and context switches of every thread of `pid`."""
    ns = switches = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                ns += int(f.read().split()[0])
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                switches += sum(int(l.split()[1]) for l in f if "ctxt_switches" in l)
        except OSError:  # the thread ended meanwhile
            pass
    return ns, switches


class Side:
    def __init__(self, pid, url, verb, body):
        u = urllib.parse.urlparse(url)
        self.pid, self.verb, self.body = pid, verb, body
        self.path = u.path.rstrip("/") + "/" + verb
        self.conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30)
        self.cpu_us, self.switches, self.latency_us = [], [], []

    def request(self):
        """One POST; its latency as the client sees it, in microseconds."""
        start = time.perf_counter()
        self.conn.request("POST", self.path, self.body, {"Content-Type": "application/json"})
        reply = self.conn.getresponse()
        reply.read()
        if reply.status != 200:
            sys.exit(f"{self.path}: HTTP {reply.status}")
        return (time.perf_counter() - start) * 1e6

    def round(self, n, gap, record=True):
        ns0, sw0 = cpu_and_switches(self.pid)
        latencies = []
        for _ in range(n):
            latencies.append(self.request())
            if gap:
                time.sleep(gap)
        ns1, sw1 = cpu_and_switches(self.pid)
        if record:
            self.cpu_us.append((ns1 - ns0) / n / 1000)
            self.switches.append((sw1 - sw0) / n)
            self.latency_us.extend(latencies)


def main():
    if len(sys.argv) < 7:
        sys.exit(__doc__)
    pid_a, url_a, pid_b, url_b, body_path, verb = sys.argv[1:7]
    n = int(sys.argv[7]) if len(sys.argv) > 7 else 200
    rounds = int(sys.argv[8]) if len(sys.argv) > 8 else 20
    gap = (float(sys.argv[9]) if len(sys.argv) > 9 else 3.0) / 1000
    with open(body_path, "rb") as f:
        body = f.read()
    a, b = Side(pid_a, url_a, verb, body), Side(pid_b, url_b, verb, body)
    a.round(100, 0, record=False)
    b.round(100, 0, record=False)
    ratios, p50_ratios = [], []
    for _ in range(rounds):
        a.round(n, gap)
        b.round(n, gap)
        ratios.append(a.cpu_us[-1] / b.cpu_us[-1])
        p50_ratios.append(
            statistics.median(a.latency_us[-n:]) / statistics.median(b.latency_us[-n:])
        )
    med = statistics.median

    def p99(values):
        return sorted(values)[min(len(values) - 1, len(values) * 99 // 100)]

    print(
        f"{verb} {os.path.basename(body_path)} gap {gap * 1000:g} ms, {rounds} rounds of {n}: "
        f"A {med(a.cpu_us):.0f} us CPU, {med(a.switches):.1f} switches per request | "
        f"B {med(b.cpu_us):.0f} us, {med(b.switches):.1f} | "
        f"A/B {med(ratios):.2f} (rounds {min(ratios):.2f}-{max(ratios):.2f})"
    )
    print(
        f"  latency, client-side: A p50 {med(a.latency_us):.0f} us p99 {p99(a.latency_us):.0f} | "
        f"B p50 {med(b.latency_us):.0f} us p99 {p99(b.latency_us):.0f} | "
        f"A/B p50 {med(p50_ratios):.2f} (rounds {min(p50_ratios):.2f}-{max(p50_ratios):.2f}), "
        f"p99 {p99(a.latency_us) / p99(b.latency_us):.2f}"
    )


if __name__ == "__main__":
    main()
