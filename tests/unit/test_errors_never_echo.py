"""docs/design/security.md: "The error text describes a key or value that is
not name-like and never echoes it: the file may be /etc/shadow." A line of
/etc/shadow given where a name, a number, a CPU list or tool arguments are
expected is refused naming the file and the key, with what is wrong and
where, and none of its text in the message; a name-like value is shown as
it is, so a typo stays easy to find."""
import pytest

from rtlab.core.params import Args, Bool, Cpus, Int, Num, ParamError, Text, check_name
from rtlab.errors import InputError
from rtlab.plan.campaign import load_campaign

SHADOW = "root:$6$s4lt$hunter2hash:20228:0:99999:7:::"


def fragments(secret: str, n: int = 4) -> set[str]:
    """Every run of n characters of the secret but the plainest ones
    ('root' is a word a message may say for other reasons)."""
    return {secret[i:i + n] for i in range(len(secret) - n + 1)} - {"root"}


def echoes(message: str, secret: str = SHADOW) -> list[str]:
    return sorted(f for f in fragments(secret) if f in message)


@pytest.mark.parametrize("value, problem", [
    (SHADOW, "its character 5 is not a letter, digit"),
    ("p" * 70_000, "it has 70000 characters"),
    ("", "it is empty"),
    ("-rf", "its first character is not a letter or digit"),
    ("qemu..x", "it has '..' at character 5"),
    ("board\n", "its character 6 is not a letter, digit"),  # SAFE_NAME's $ alone let a final newline through
    ("bö", "its character 2 is not a letter, digit"),
])
def test_a_name_that_is_not_one_is_described_not_echoed(value, problem):
    with pytest.raises(ParamError) as e:
        check_name(value, "board name")
    text = str(e.value)
    assert text.startswith("board name") and problem in text, text
    if value == "qemu..x":  # name-like characters: shown, the typo is easy to see
        assert "board name 'qemu..x' is not" in text, text
    else:
        assert f"a string of {len(value)} character" in text, text
    assert echoes(text, value if len(value) > 8 else SHADOW) == [], text
    assert len(text) < 400


def test_a_name_like_typo_is_shown_as_it_is():
    with pytest.raises(ParamError) as e:
        check_name("qemu/x86", "board name")
    assert "board name 'qemu/x86' is not a safe name: its character 5" in str(e.value)
    assert check_name("qemu-x86_64.v2") == "qemu-x86_64.v2"


@pytest.mark.parametrize("spec", [Int(0, 99), Num(10.0), Bool(), Text(r"[a-z]+", "a word"), Args(), Cpus()],
                         ids=lambda s: type(s).__name__)
def test_every_parameter_check_describes_a_bad_value_without_echoing_it(spec):
    for bad in (SHADOW, [SHADOW], {"k": SHADOW}):
        if isinstance(spec, Args) and bad == [SHADOW]:
            continue  # a list of arguments: what Args takes
        with pytest.raises(ParamError) as e:
            spec.check(bad)
        assert echoes(str(e.value)) == [], (spec, str(e.value))
    # numbers are shown: they are the typo
    if isinstance(spec, Int):
        with pytest.raises(ParamError, match="between 0 and 99, got 120"):
            spec.check(120)


@pytest.mark.parametrize("where, yaml_text, key", [
    ("boards", "boards: ['{s}']\n", "boards:"),
    ("variants", "boards: [local]\nvariants: ['{s}']\n", "variants:"),
    ("name", "name: '{s}'\nboards: [local]\n", "name"),
    ("suite", "boards: [local]\nsuites:\n  - {{suite: '{s}', loads: [idle]}}\n", "suites[0].name"),  # name: the suite's
    ("load", "boards: [local]\nsuites:\n  - {{suite: cyclictest, loads: ['{s}']}}\n", "suites[0].loads"),
    ("override", "boards: [local]\nsuites:\n  - {{suite: cyclictest, loads: [idle], overrides: {{'{s}': {{}}}}}}\n",
     "suites[0].overrides"),
    ("param", "boards: [local]\nsuites:\n  - {{suite: cyclictest, loads: [idle], params: {{duration_s: '{s}'}}}}\n",
     "suites[0].params.duration_s"),
    ("cpus", "boards: [local]\nsuites:\n  - {{suite: cyclictest, loads: [idle], params: {{cpus: '{s}'}}}}\n",
     "suites[0].params.cpus"),
])
def test_a_campaign_of_shadow_lines_names_file_and_key_and_echoes_nothing(tmp_path, where, yaml_text, key):
    c = tmp_path / "c.yaml"
    text = yaml_text.format(s=SHADOW)
    if "suites" not in text:
        text += "suites:\n  - {suite: cyclictest, loads: [idle]}\n"
    c.write_text(text)
    with pytest.raises(InputError) as e:
        load_campaign(c)
    msg = str(e.value)
    assert str(c) in msg and key in msg, msg
    assert echoes(msg) == [], msg
