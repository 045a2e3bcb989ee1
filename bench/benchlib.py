"""What every bench/ script reports: percentiles of a series, and one row of them."""
import statistics, time

def pct(xs, p):
    """The p-th percentile of xs (nearest rank); 0.0 for an empty series."""
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))] if xs else 0.0

def summary(xs, scale=1000.0, digits=1, name=None):
    """n, p50/p90/p99, mean and max of xs (seconds, shown as ms by default)."""
    row = {"n": len(xs)}
    if name is not None:
        row["name"] = name
    for p in (50, 90, 99):
        row[f"p{p}_ms"] = round(pct(xs, p) * scale, digits)
    row["mean_ms"] = round(statistics.mean(xs) * scale, digits) if xs else 0.0
    row["max_ms"] = round(max(xs) * scale, digits) if xs else 0.0
    return row

def timed(n, fn):
    """Seconds each of n calls of fn takes."""
    xs = []
    for _ in range(n):
        t = time.monotonic()
        fn()
        xs.append(time.monotonic() - t)
    return xs
