"""A kernel tree written by an attacker, for the build sandbox's fault tests.

It speaks the interface `rtlab kernel build` drives (a git repository with a
Makefile and a Kconfig; `make tinyconfig`, `scripts/kconfig/merge_config.sh`,
`make olddefconfig`, the image target, `make -s kernelrelease`) without
compiling anything, so a test runs in seconds. Its Makefile and its
merge_config.sh each run `attack.sh`, which tries, as a merge request's tree
could, everything the sandbox must stop, and prints one `ATTACK ...` line per
attempt into the build log:

    ATTACK <vector> wrote <path> | refused <path>
    ATTACK <vector> env RTLAB_INFLUX_PASSWORD=<value or none>
    ATTACK <vector> file <credential file's first line or none>
    ATTACK <vector> connected | no-network
    ATTACK <vector> left sleep <marker>

Its image is a valid-looking bzImage (the setup header's magic), or, with
*image* = "symlink" / "huge", a symlink to a file of the runner's or a 10 GB
sparse file: what the build hands back to rtlab.
"""
from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path
from typing import Optional, Sequence

MAKEFILE = r"""
# not a kernel: the targets rtlab's build drives, each after the attack
O ?= .
ATTACK = sh $(CURDIR)/attack.sh makefile
.PHONY: tinyconfig olddefconfig bzImage kernelrelease
tinyconfig:
	@$(ATTACK)
	@mkdir -p $(O) && echo "CONFIG_X86_64=y" > $(O)/.config
olddefconfig:
	@$(ATTACK)
bzImage:
	@$(ATTACK)
	@mkdir -p $(O)/arch/x86/boot
	@__IMAGE__
kernelrelease:
	@echo __RELEASE__
"""

IMAGES = {
    # the setup header's magic where a bzImage has it, and nothing else
    "valid": "python3 -c 'import sys; d = bytearray(4096); d[0x202:0x206] = b\"HdrS\"; "
             "open(sys.argv[1], \"wb\").write(d)' $(O)/arch/x86/boot/bzImage",
    "symlink": "ln -sf __SECRET__ $(O)/arch/x86/boot/bzImage",
    "huge": "truncate -s 10G $(O)/arch/x86/boot/bzImage",
    # a real kernel the tree carries (Debian's, committed beside the Makefile): it boots
    "real": "cp $(CURDIR)/real-bzImage $(O)/arch/x86/boot/bzImage",
}

MERGE_CONFIG = r"""#!/bin/sh
# merge_config.sh -m -O DIR BASE FRAGMENT...: concatenated, as the real one merges
sh "$(dirname "$0")/../../attack.sh" merge_config
shift 3
base=$1; shift
cat "$base" "$@" > "$base.new" && mv "$base.new" "$base"
"""

ATTACK = r"""#!/bin/sh
# everything a build must not do; one line per attempt
v=$1
for dir in __TARGETS__; do
  if echo pwned > "$dir/rtlab-pwned-__MARKER__-$v" 2>/dev/null; then echo "ATTACK $v wrote $dir"; else echo "ATTACK $v refused $dir"; fi
done
echo "ATTACK $v env RTLAB_INFLUX_PASSWORD=${RTLAB_INFLUX_PASSWORD:-none} RTLAB_TRIGGER_TOKEN=${RTLAB_TRIGGER_TOKEN:-none}"
echo "ATTACK $v file $(head -n1 __SECRET__ 2>/dev/null || echo none)"
if python3 -c 'import socket; socket.create_connection(("127.0.0.1", __PORT__), 3)' 2>/dev/null; then
  echo "ATTACK $v connected"
else
  echo "ATTACK $v no-network"
fi
setsid sh -c 'sleep 600' "rtlab-attack-__MARKER__" </dev/null >/dev/null 2>&1 &
echo "ATTACK $v left sleep __MARKER__"
"""


def make_attack_tree(path: Path, *, targets: Sequence[Path], secret: Path, port: int, marker: str,
                     image: str = "valid", real_image: Optional[Path] = None, release: str = "6.12.0-attack") -> Path:
    """The attacker's tree at *path*, committed: its attack tries to write
    into each of *targets*, read *secret*, connect to 127.0.0.1:*port* and
    leave a process whose command line holds *marker*. *image* "real" hands
    back *real_image* (a kernel of *release*: the tree boots)."""
    if (image == "real") != (real_image is not None):
        raise ValueError("image 'real' and real_image go together")
    path.mkdir(parents=True)
    fill = {"__TARGETS__": " ".join(f"'{t}'" for t in targets), "__SECRET__": str(secret),
            "__PORT__": str(port), "__MARKER__": marker, "__RELEASE__": release}

    def put(rel: str, text: str, mode: int = 0o644) -> None:
        for k, v in fill.items():
            text = text.replace(k, v)
        f = path / rel
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
        f.chmod(mode)

    put("Makefile", textwrap.dedent(MAKEFILE).replace("__IMAGE__", IMAGES[image]))
    put("Kconfig", "# not a kernel\n")
    put("attack.sh", ATTACK, 0o755)
    put("scripts/kconfig/merge_config.sh", MERGE_CONFIG, 0o755)
    if real_image is not None:
        (path / "real-bzImage").write_bytes(real_image.read_bytes())
    for args in (["init", "-q", "-b", "main"], ["add", "."],
                 ["-c", "user.name=a", "-c", "user.email=a@a", "commit", "-qm", "attack"]):
        subprocess.run(["git", "-C", str(path), *args], check=True)
    return path
