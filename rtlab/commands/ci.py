"""`rtlab junit RUN_DIR... -o FILE`: JUnit XML of one or more runs, for CI
(GitLab `artifacts:reports:junit`); see rtlab/report/junit.py. Exit 0 when written,
whatever the verdicts (the gate judges; this only reports)."""
from __future__ import annotations

import json
from pathlib import Path

from ..report.junit import write_junit
from ..run.results import load_run


def register(sub):
    p = sub.add_parser("junit", help="JUnit XML of runs (one testcase per measurement) for CI")
    p.add_argument("run_dirs", nargs="+", type=Path, metavar="RUN_DIR", help="run directories (results/<run_id>)")
    p.add_argument("-o", "--output", type=Path, required=True, metavar="FILE", help="the JUnit XML file to write")
    p.set_defaults(func=junit)


def junit(args) -> int:
    runs = [load_run(d) for d in args.run_dirs]
    verdicts = {}  # the regression verdict, where rtlab compare/gate --baseline left one
    for run, d in zip(runs, args.run_dirs):
        f = Path(d) / "compare.json"
        if f.is_file():
            try:
                verdicts[run.run_id] = json.loads(f.read_text())
            except ValueError:
                pass
    print(f"junit: {write_junit(runs, args.output, verdicts)} "
          f"({sum(len(r.jobs) for r in runs)} jobs, {sum(1 for r in runs for _ in r.measurements())} measurements)")
    return 0
