"""The console renice the loads rely on, relative to the niceness the tests run at."""
import os


def test_the_console_renice_reaches_the_console_shell_not_its_command():
    """labgrid runs each command as `sh -c CMD` from the console shell: the
    renice must reach that shell (the command's parent), which then starts
    the fetches at that niceness; the board probe reads it back from there."""
    import subprocess

    from rtlab.loads.base import console_renice, probe_board

    console = ('p="$2"; sh -c "$1"; read -r l < /proc/$$/stat; set -- ${l##*) }; echo ${17}; '
               'sh -c "$p"')  # the console shell: one command, its own niceness, the probe as a command

    def as_console(cmd: str, probe: str = "true") -> list[str]:
        return subprocess.run(["sh", "-c", console, "console", cmd, probe], capture_output=True,
                              text=True, check=True).stdout.split("\n")

    # relative to the niceness this test runs at (`nice pytest` starts at 10):
    # the console starts there, and only the renice may move it
    base = os.nice(0)
    assert as_console(console_renice(base + 5))[0] == str(base + 5)
    assert as_console(f"renice {base + 5} -p $$ > /dev/null 2>&1")[0] == str(base)  # the old command: a no-op

    class Probe:  # probe_board's command, run by a console shell reniced first
        def run(self, cmd, timeout=30.0):
            out = as_console(console_renice(base + 7), cmd)
            return out[1:], 0

    assert probe_board(Probe())["console_nice"] == base + 7
