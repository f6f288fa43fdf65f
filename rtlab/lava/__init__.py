"""rtlab's boards, variants and suites as LAVA jobs (`rtlab lava ...`).

* :mod:`.boards`   lava/boards.yaml: device type, boot method, dictionary per board
* :mod:`.devices`  device dictionaries for lava-run, generated from env/ for QEMU boards
* :mod:`.onboard`  what runs on the board (busybox sh/awk): raw outputs, lava-test-case
* :mod:`.render`   campaign -> job definitions (declared cases in metadata)
* :mod:`.schema`   LAVA's own schema (lava-common, under /usr/bin/python3)
* :mod:`.dispatch` lava-run here (job ids, progress), lavacli for a server
* :mod:`.logs`     the log stream and the results exports, raw blocks
* :mod:`.ingest`   records -> results/<run_id>/run.json, verdicts

See lava/README.md.
"""
