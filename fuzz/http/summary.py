#!/usr/bin/env python3
"""Per-operation numbers of a schemathesis run, from its NDJSON report: test cases, requests,
the status codes answered, and failed checks (by check name and phase)."""
import collections
import json
import sys


def main(paths):
    cases = collections.Counter()
    requests = collections.Counter()
    statuses = collections.defaultdict(collections.Counter)
    failures = collections.defaultdict(collections.Counter)
    for path in paths:
        with open(path) as events:
            for line in events:
                event = json.loads(line)
                finished = event.get("ScenarioFinished")
                if not finished:
                    continue
                recorder = finished.get("recorder") or {}
                label = recorder.get("label", "?")
                cases[label] += len(recorder.get("cases") or {})
                for interaction in (recorder.get("interactions") or {}).values():
                    requests[label] += 1
                    response = interaction.get("response") or {}
                    statuses[label][response.get("status_code", "no answer")] += 1
                for checks in (recorder.get("checks") or {}).values():
                    for check in checks:
                        if check.get("status") == "failure":
                            failures[label][f"{check['name']} ({finished.get('phase')})"] += 1
    width = max((len(label) for label in cases), default=10)
    print(f"{'operation':<{width}}  {'cases':>6}  {'requests':>8}  statuses")
    for label in sorted(cases):
        answered = " ".join(f"{code}x{n}" for code, n in sorted(statuses[label].items(), key=lambda kv: str(kv[0])))
        print(f"{label:<{width}}  {cases[label]:>6}  {requests[label]:>8}  {answered}")
        for what, n in sorted(failures[label].items()):
            print(f"{'':<{width}}  FAILED {what}: {n}")
    print(f"{'total':<{width}}  {sum(cases.values()):>6}  {sum(requests.values()):>8}  "
          f"failed checks: {sum(sum(f.values()) for f in failures.values())}")


if __name__ == "__main__":
    main(sys.argv[1:])
