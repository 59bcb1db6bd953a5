"""The harness's secrets (`verify.sandbox.secrets`, `hardening.scrub_environ_block`): redacted from what a
child says by their digests alone, gone from a child's kernel-side environment, and gone from the program's own
once it re-executes itself."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from verify.report.verdict import GateOutcome, MutationResult, Outcome, Status
from verify.run.phases.state import _redacted
from verify.sandbox.secrets import MIN_LENGTH, REDACTED, Secrets


@pytest.mark.parametrize(
    ("values", "text", "redacted"),
    [
        (["s3cr3t-value"], "boom: s3cr3t-value!", f"boom: {REDACTED}!"),
        (["s3cr3t-value"], "s3cr3t-values twice s3cr3t-value", f"{REDACTED}s twice {REDACTED}"),
        (["abcdef", "abcdefgh"], "xabcdefghx abcdefx", f"x{REDACTED}x {REDACTED}x"),  # the longest first
        (["pässwörd-ü"], "an ünïcode pässwörd-ü here", f"an ünïcode {REDACTED} here"),
        (["short"], "short stays", "short stays"),  # under MIN_LENGTH: no secret
        (["s3cr3t-value"], "s3cr3t-valu is not it", "s3cr3t-valu is not it"),
        ([], "nothing known", "nothing known"),
    ],
)  # fmt: skip
def test_redaction_replaces_every_known_value_and_nothing_else(values, text, redacted) -> None:
    assert len("short") < MIN_LENGTH
    assert Secrets.of(values).redact(text) == redacted


def test_a_verdict_is_recorded_with_its_childrens_words_redacted() -> None:
    secrets = Secrets.of(["tok-123456789"])
    outcome = GateOutcome("g", Outcome.EXCEPTION, 0.1, "RuntimeError", "leaked tok-123456789")
    result = MutationResult("m", Status.CRASHED, outcomes=(outcome,), reason="crashed: tok-123456789")
    redacted = _redacted(result, secrets)
    assert redacted.outcomes[0].message == f"leaked {REDACTED}" and redacted.reason == f"crashed: {REDACTED}"


def test_a_child_scrubs_the_kernel_copy_of_its_environment(tmp_path) -> None:
    # A process started with the secret (as the user's shell starts the program): its fork, hardened, shows the
    # kernel no trace of it, while a setting a gate reads stays.
    script = textwrap.dedent("""
        import os
        from verify.sandbox import hardening
        pid = os.fork()
        if pid == 0:
            hardening.harden({}, hardening.Ceilings())
            block = open("/proc/self/environ", "rb").read()
            os._exit(0 if b"hunter2-secret" not in block and b"KEEP_ME=yes" in block else 1)
        print(os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        print(b"hunter2-secret" in open("/proc/self/environ", "rb").read())
    """)
    env = {**os.environ, "MY_API_KEY": "hunter2-secret", "KEEP_ME": "yes", "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["0", "True"], done.stderr  # the child's is clean, its parent's untouched


def test_the_program_re_executes_itself_without_secrets_and_keeps_their_digests(tmp_path) -> None:
    script = textwrap.dedent("""
        import os, sys
        from verify.sandbox import secrets
        secrets.is_program = lambda: True  # this script stands for `python -m verify`
        secrets.reexec_clean()
        known = secrets.known()
        block = open("/proc/self/environ", "rb").read()
        print(b"hunter2-secret" in block, "MY_API_KEY" in os.environ, secrets.FD_ENV in os.environ)
        print(known.redact("x hunter2-secret x"))
    """)
    env = {**os.environ, "MY_API_KEY": "hunter2-secret", "PYTHONPATH": os.getcwd()}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == ["False False False", f"x {REDACTED} x"], done.stderr
