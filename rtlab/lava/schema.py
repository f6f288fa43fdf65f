"""LAVA's own job schema, applied to rtlab's job definitions.

The schema is Debian's `lava-common` (``lava_common.schemas.validate(job,
strict=True)``, the check a LAVA server runs at submission). It lives in the
system Python (/usr/bin/python3, Debian packages); rtlab's venv is another
Python and does not see system site-packages. Rather than opening the venv
to every Debian module, rtlab runs a few lines under /usr/bin/python3 as a
subprocess: one call validates any number of jobs, the YAML text exactly as
it would be submitted.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Iterable, Optional

from ..errors import RtlabError

SYSTEM_PYTHON = os.environ.get("RTLAB_LAVA_PYTHON", "/usr/bin/python3")

_VALIDATOR = r"""
import json, sys
import yaml
try:
    from lava_common.schemas import validate
    from lava_common.compat import yaml_safe_load
except ImportError as e:
    print(json.dumps({"error": "lava-common is not installed (%s)" % e}))
    sys.exit(0)
from voluptuous import Invalid
jobs = json.load(sys.stdin)
out = {}
for name, text in jobs:
    try:
        data = yaml_safe_load(text)
        validate(data, strict=True)
        out[name] = None
    except Invalid as e:
        path = "/".join(str(p) for p in (e.path or []))
        out[name] = ("%s (at %s)" % (e.msg, path)) if path else str(e)
    except Exception as e:  # a YAML error, or the schema tripping over the data
        out[name] = "%s: %s" % (type(e).__name__, e)
import lava_common.version as v
print(json.dumps({"results": out, "version": getattr(v, "__version__", "?")}))
"""


class SchemaUnavailable(RtlabError):
    pass


def validate_texts(jobs: Iterable[tuple[str, str]], python: Optional[str] = None) -> tuple[dict[str, Optional[str]], str]:
    """{name: None (valid) | error} for (name, YAML text) pairs, and the
    lava-common version that judged them."""
    py = python or SYSTEM_PYTHON
    payload = json.dumps(list(jobs))
    try:
        res = subprocess.run([py, "-c", _VALIDATOR], input=payload, capture_output=True, text=True,
                             timeout=300)
    except FileNotFoundError:
        raise SchemaUnavailable(f"{py} not found: LAVA's schema needs Debian's python3 with lava-common") from None
    if res.returncode != 0:
        raise SchemaUnavailable(f"LAVA schema check failed to run ({py}): {res.stderr.strip()[-500:]}")
    doc = json.loads(res.stdout)
    if "error" in doc:
        raise SchemaUnavailable(f"{doc['error']}: apt-get install --no-install-recommends lava-common")
    return doc["results"], doc["version"]


def validate_files(paths: Iterable[Path], python: Optional[str] = None) -> tuple[dict[str, Optional[str]], str]:
    return validate_texts(((str(p), Path(p).read_text()) for p in paths), python)
