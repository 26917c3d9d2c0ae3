"""The pytest plugin and the certification suite, run as a backend's authors run them:
in a pytest process of their own, through ``--memcert-backend`` or a subclass."""

from __future__ import annotations

import re
from xml.etree import ElementTree

import pytest

from .support import QUICK_PROFILE, untimed
from .test_machine import LEAK, LEAK_PROGRAM

PLUGIN = ("-p", "invariants.pytest_plugin", "-p", "_hypothesis_pytestplugin",
          "-p", "xdist.plugin", "--hypothesis-profile=memcert-quick", "-p", "no:cacheprovider")
"""Load the plugin by module, with Hypothesis's (for ``--hypothesis-profile``) and
xdist's, and use a derandomized profile, so that every run sees the same programs. The
plugins installed for other tests (locust, schemathesis, langsmith) are not loaded
(``PYTEST_DISABLE_PLUGIN_AUTOLOAD``, below): they would add seconds to every run, and
``memcert``'s own entry point would load the plugin twice."""


@pytest.fixture(autouse=True)
def _no_other_plugins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(QUICK_PROFILE.format(examples=40))
    return pytester


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess(*PLUGIN, *args)


def verdicts(pytester: pytest.Pytester, *args: str) -> dict[str, str]:
    """Run, and read each test's outcome from the JUnit XML report."""
    report = pytester.path / f"junit{len(args)}.xml"
    run(pytester, f"--junitxml={report}", *args)
    found = {}
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        outcome = next((child.tag for child in case
                        if child.tag in ("failure", "error", "skipped")), "passed")
        found[f"{case.get('classname')}::{case.get('name')}"] = outcome
    return found


def test_the_option_runs_the_suite_and_skips_what_the_backend_lacks_saying_why(suite):
    result = run(suite, "--memcert-backend=chaos.examples:no_restore",
                 "--memcert-level=surface", "-rs")

    result.assert_outcomes(passed=7, skipped=3)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] *: chaos.examples:no_restore does not implement restore (restore "
        "raised NotImplementedError); restore checks skipped"])
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] *: chaos.examples:no_restore declares normalization level "
        "'surface'; lexical paraphrases are not required of it"])


def test_a_violation_fails_its_test_with_the_runnable_program_printed_and_saved(suite):
    report = suite.path / "report"
    result = run(suite, "--memcert-backend=chaos.examples:leaky_namespaces",
                 f"--memcert-out={report}", "-k", "isolation")

    result.assert_outcomes(failed=1, deselected=9)
    saved = report / "stateful" / "test_isolation.py"
    assert saved.read_text(encoding="utf-8") == LEAK_PROGRAM
    message = "\n\n".join([
        "memcert: chaos.examples:leaky_namespaces breaks isolation (level lexical).",
        LEAK,
        "The shortest program found that shows it (run it with python):",
        LEAK_PROGRAM.rstrip("\n"),
    ])
    assert message in untimed(result.stdout.str())
    result.stdout.fnmatch_lines(["You can reproduce this test case by temporarily adding "
                                 "@reproduce_failure(*) as a decorator on your test function",
                                 "", f"Saved as {saved}"])


def test_every_failing_id_the_suite_prints_runs_that_test_again_as_printed(suite):
    leaky = "--memcert-backend=chaos.examples:leaky_namespaces"
    first = run(suite, leaky, "-k", "isolation")

    first.assert_outcomes(failed=1, deselected=9)
    (printed,) = re.findall(r"^FAILED (\S+)", first.stdout.str(), re.MULTILINE)
    assert printed == "memcert-suite::TestMemcertBackend::test_isolation"
    again = run(suite, leaky, "-v", printed,
                "memcert-suite::TestMemcertBackend::test_semantic_normalization[surface]")
    again.assert_outcomes(failed=1, passed=1)
    assert re.findall(r"^FAILED (\S+)", again.stdout.str(), re.MULTILINE) == [printed]
    again.stdout.fnmatch_lines([
        "memcert-suite::TestMemcertBackend::test_semantic_normalization[[]surface[]] PASSED*"])


def test_a_suite_id_without_a_backend_is_a_usage_error(suite):
    result = run(suite, "memcert-suite::TestMemcertBackend::test_isolation")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: memcert-suite::TestMemcertBackend::test_isolation is a test of the memcert "
        "certification suite, which runs against a backend: add "
        "--memcert-backend=package.module:factory"])


def test_the_after_restore_test_reports_a_program_with_a_restore(suite):
    result = run(suite, "--memcert-backend=chaos.examples:restore_revives",
                 "-k", "after_restore")

    result.assert_outcomes(failed=1, deselected=9)
    program = result.stdout.str().split("(run it with python):")[1]
    assert "\nstate.restore(entity=" in program.split("state.teardown()")[0]


def test_the_after_restore_test_never_fails_on_a_program_without_a_restore(suite):
    """The expiring tombstone breaks deletion monotonicity with no restore, and the
    search stops there: the after-restore test says it could not decide, with no
    program, rather than report one that restores nothing."""
    result = run(suite, "--memcert-backend=chaos.examples:expiring_tombstone",
                 "-k", "deletion_monotonicity")

    result.assert_outcomes(failed=2, deselected=8)
    report = result.stdout.str().split(
        "TestMemcertBackend.test_deletion_monotonicity_after_restore ___", 1)[1]
    own = report.split("short test summary info", 1)[0]
    assert "The shortest program found that shows it" not in own
    assert "state." not in own
    result.stdout.fnmatch_lines([
        "memcert could not decide deletion_monotonicity after a restore for "
        "chaos.examples:expiring_tombstone: the search stopped at a program that breaks "
        "deletion_monotonicity with no restore (test_deletion_monotonicity shows it), "
        "before any program that breaks it after one. Nothing after a restore was "
        "decided, so this is not a pass; fix that deletion_monotonicity failure first."])


def test_the_budget_bounds_the_whole_suite_and_every_test_still_decides(pytester):
    pytester.makeconftest(QUICK_PROFILE.format(examples=100_000))
    report = pytester.path / "junit.xml"
    result = run(pytester, "--memcert-backend=chaos.examples:in_memory", "--memcert-budget=6",
                 f"--junitxml={report}")

    result.assert_outcomes(passed=9, skipped=1)
    spent = sum(float(case.get("time", "0"))
                for case in ElementTree.parse(report).getroot().iter("testcase"))
    assert spent < 9, spent


@pytest.mark.parametrize("value", ["0", "-5", "soon", "nan", "inf"])
def test_a_budget_that_is_not_a_positive_number_of_seconds_is_a_usage_error(suite, value):
    result = run(suite, "--memcert-backend=chaos.examples:in_memory",
                 f"--memcert-budget={value}")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        f"ERROR: --memcert-budget='{value}' must be a positive number of seconds; for "
        "example --memcert-budget=120"])


def test_a_subclass_declares_its_level_and_m_memcert_selects_the_suite_only(suite):
    suite.makepyfile(test_store="""
        import pytest

        from invariants.certification_suite import MemoryBackendCertification

        class TestStore(MemoryBackendCertification):
            @pytest.fixture
            def backend_factory(self):
                return "chaos.examples:in_memory"

            @pytest.fixture
            def memcert_level(self):
                return "surface"

        def test_something_else():
            pass
    """)
    result = run(suite, "-m", "memcert", "-rs")

    result.assert_outcomes(passed=8, skipped=2, deselected=1)
    result.stdout.fnmatch_lines([
        "SKIPPED [[]1[]] *: chaos.examples:in_memory declares normalization level "
        "'surface'; lexical paraphrases are not required of it"])


def test_a_checker_with_nothing_to_check_fails_as_undecided(suite):
    suite.makepyfile(test_store="""
        import pytest

        from chaos.examples import InMemoryBackend, SharedFactory
        from invariants.certification_suite import MemoryBackendCertification

        class ReadsFail(InMemoryBackend):
            def read(self, namespace, entity_id):
                raise ConnectionError("read refused")

        reads_fail = SharedFactory(ReadsFail)

        class TestStore(MemoryBackendCertification):
            @pytest.fixture
            def backend_factory(self):
                return reads_fail
    """)
    result = run(suite, "-k", "phantom")

    result.assert_outcomes(failed=1, deselected=9)
    result.stdout.fnmatch_lines([
        "memcert could not decide phantom for SharedFactory(ReadsFail, level='lexical'): "
        "nothing to check: no read returned a record. Nothing was checked, so this is not a "
        "pass."])


def test_a_suite_test_left_out_or_overridden_without_an_xfail_reason_is_an_error(suite):
    header = """
        import pytest

        from invariants.certification_suite import MemoryBackendCertification

    """
    suite.makepyfile(
        test_left_out=header + """
        class TestLeftOut(MemoryBackendCertification):
            test_isolation = None
        """,
        test_overridden=header + """
        class TestOverridden(MemoryBackendCertification):
            def test_isolation(self):
                pass
        """,
        test_xfailed=header + """
        class TestXfailed(MemoryBackendCertification):
            @pytest.fixture
            def backend_factory(self):
                return "chaos.examples:in_memory"

            @pytest.mark.xfail(reason="phantoms under review")
            def test_phantom(self):
                assert False
        """,
    )
    result = run(suite, "--continue-on-collection-errors", "-k", "test_phantom", "-rx")

    result.assert_outcomes(errors=2, xfailed=1, deselected=9)
    result.stdout.fnmatch_lines([
        "E   invariants.certification_suite.IncompleteSuite: TestLeftOut leaves out "
        "test_isolation of the memcert certification suite. A certification runs every "
        "test; to record a known failure, override it with @pytest.mark.xfail(reason=...) "
        "instead."])
    result.stdout.fnmatch_lines([
        "E   invariants.certification_suite.IncompleteSuite: TestOverridden overrides "
        "test_isolation of the memcert certification suite without an xfail reason. Mark "
        'the override @pytest.mark.xfail(reason="why it fails"), or remove it.'])
    result.stdout.fnmatch_lines(
        ["XFAIL test_xfailed.py::TestXfailed::test_phantom - phantoms under review"])


def test_a_misspelt_backend_is_a_usage_error(suite):
    result = run(suite, "--memcert-backend=in_memory")

    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([
        "ERROR: --memcert-backend='in_memory' is not of the form package.module:factory; "
        "for example --memcert-backend=reference_store:factory"])


def test_the_same_verdicts_under_xdist(pytester):
    # Fewer programs than the other tests run: the verdicts, not the search, are compared.
    suite = pytester
    suite.makeconftest(QUICK_PROFILE.format(examples=25))
    suite.makepyfile(test_verdicts="""
        import pytest

        from invariants.certification_suite import MemoryBackendCertification

        class TestNoRestore(MemoryBackendCertification):
            @pytest.fixture
            def backend_factory(self):
                return "chaos.examples:no_restore"

        class TestLeaky(MemoryBackendCertification):
            @pytest.fixture
            def backend_factory(self):
                return "chaos.examples:leaky_namespaces"
    """)
    alone = verdicts(suite)
    spread = verdicts(suite, "-n", "2")

    # A backend that passes everything but restore, and one that fails: every verdict
    # there is (passed, skipped, failed), in two classes the two workers split.
    assert spread == alone
    assert len(alone) == 20
    assert {test: outcome for test, outcome in alone.items() if outcome != "passed"} == {
        "test_verdicts.TestNoRestore::test_deletion_monotonicity_after_restore": "skipped",
        "test_verdicts.TestNoRestore::test_semantic_normalization[semantic]": "skipped",
        "test_verdicts.TestLeaky::test_semantic_normalization[semantic]": "skipped",
        "test_verdicts.TestLeaky::test_isolation": "failure",
    }


def test_the_reference_store_passes_the_suite(pytester, db_url, monkeypatch):
    """Half the other runs' examples: the reference store answers from a real database,
    and what is asserted is that the suite passes it, not how deep the search went
    (tests/stateful/test_machine.py runs the machine on it directly)."""
    pytester.makeconftest(QUICK_PROFILE.format(examples=20))
    monkeypatch.setenv("MEMCERT_DB_URL", db_url)
    result = run(pytester, "--memcert-backend=reference_store:factory")

    result.assert_outcomes(passed=9, skipped=1)
