# objs.py - python3 building objects (600,000 strings, 60,000 lists: 680 MiB of anonymous
# memory) and printing a SHA-256 over them, for zfolio run's tests (run_test.sh python)
# and bench/run_vs_cgroup.sh: the same digest with and without zfolio.
import hashlib
d = {}
for i in range(600000):
    d[i] = ("value-%d-" % i) * 20
objs = [list(range(i, i + 50)) for i in range(0, 600000, 10)]
h = hashlib.sha256()
for i in range(0, 600000, 7):
    h.update(d[i].encode())
for o in objs[::13]:
    h.update(repr(o).encode())
print(h.hexdigest(), len(d), len(objs))
