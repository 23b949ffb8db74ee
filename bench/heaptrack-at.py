#!/usr/bin/env python3
"""What an `olm run` held live at a moment of its heaptrack profile (bench/olm-heaptrack.sh).

heaptrack_print reports the peak, or what is left at exit; `olm run` frees its caches when it
stops, so neither is the settled state a memory-per-namespace figure is about. heaptrack's data
(zstd-compressed text) carries timestamps, so a profile cut at a moment reads as what was live
then: heaptrack_print's "leaked" of the cut profile.

  bench/heaptrack-at.py PROFILE.zst                 live heap every 5 s (ms since start, bytes)
  bench/heaptrack-at.py PROFILE.zst --every MS      ... every MS ms
  bench/heaptrack-at.py PROFILE.zst --at MS OUT.zst the profile up to MS ms, for
      heaptrack_print -f OUT.zst -F stacks.txt --flamegraph-cost-type leaked
"""
import subprocess
import sys


def lines(profile):
    with subprocess.Popen(["zstd", "-dc", profile], stdout=subprocess.PIPE, text=True, bufsize=1 << 20) as unzip:
        yield from unzip.stdout


def series(profile, every_ms):
    # 'a SIZE TRACE' defines an allocation kind (hex), '+ N' / '- N' allocate and free one of
    # kind N, 'c MS' is a timestamp.
    sizes, live, last = [], 0, None
    for line in lines(profile):
        tag = line[0]
        if tag == "+":
            live += sizes[int(line[2:], 16)]
        elif tag == "-":
            live -= sizes[int(line[2:], 16)]
        elif tag == "a":
            sizes.append(int(line.split()[1], 16))
        elif tag == "c":
            now = int(line[2:], 16)
            if last is None or now - last >= every_ms:
                print(now, live)
                last = now
    print("end", live)


def cut(profile, at_ms, out):
    with subprocess.Popen(["zstd", "-q", "-f", "-o", out], stdin=subprocess.PIPE, text=True) as zip_:
        for line in lines(profile):
            if line[0] == "c" and int(line[2:], 16) >= at_ms:
                break
            zip_.stdin.write(line)


def main(args):
    if len(args) == 1:
        return series(args[0], 5000)
    if len(args) == 3 and args[1] == "--every":
        return series(args[0], int(args[2]))
    if len(args) == 4 and args[1] == "--at":
        return cut(args[0], int(args[2]), args[3])
    sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
