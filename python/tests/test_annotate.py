"""The Python package end to end: annotated loops write step/phase series that `collscope ingest`
stores and `collscope diagnose` reads. Run from the build tree (CTest sets PYTHONPATH=build/python
and COLLSCOPE_BIN)."""

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

BIN = os.environ.get("COLLSCOPE_BIN", "collscope")
SRC = os.environ.get("COLLSCOPE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), os.pardir, os.pardir))
TRAIN = os.path.join(SRC, "examples", "annotate", "train.py")


def run(cmd, env=None, check=True):
    p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, universal_newlines=True)
    if check and p.returncode not in (0, 1):
        raise AssertionError("%s: exit %d\n%s\n%s" % (cmd, p.returncode, p.stdout, p.stderr))
    return p


def sql(db, query):
    out = run([BIN, "sql", "--db", db, "--json", query]).stdout
    return json.loads(out)


class AnnotatedLoop(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.dump = os.path.join(self.tmp.name, "dump")
        self.db = os.path.join(self.tmp.name, "job.duckdb")

    def tearDown(self):
        self.tmp.cleanup()

    def test_five_steps_with_a_phase_slowed_at_step_3_are_stored(self):
        loop = textwrap.dedent("""
            import time, collscope
            assert collscope.enabled(), collscope.library_path()
            collscope.set_parallel(dp=(0, 1), tp=(0, 1))
            for n in range(5):
                with collscope.step(n):
                    with collscope.phase("forward"):
                        time.sleep(0.002)
                    with collscope.phase("backward"):
                        time.sleep(0.080 if n == 3 else 0.004)
        """)
        env = dict(os.environ, COLLSCOPE_DUMP_DIR=self.dump, RANK="0", WORLD_SIZE="1")
        run([sys.executable, "-c", loop], env=env)
        files = os.listdir(self.dump)
        self.assertEqual(len(files), 1, files)
        self.assertTrue(files[0].endswith(".steps.jsonl"), files)
        ing = run([BIN, "ingest", "--db", self.db, self.dump])
        self.assertEqual(ing.returncode, 0, ing.stdout + ing.stderr)
        self.assertIn("step series (step/phase files, framework iteration logs): 1 files (1 read): 5 steps", ing.stdout)
        rows = sql(self.db, "SELECT step, phase, wall_us FROM step_phases WHERE phase = 'backward' ORDER BY step")
        self.assertEqual([r["step"] for r in rows], [0, 1, 2, 3, 4])
        slowest = max(rows, key=lambda r: r["wall_us"])
        self.assertEqual(slowest["step"], 3)
        self.assertGreater(slowest["wall_us"], 70000)
        steps = sql(self.db, "SELECT count(*) AS n FROM steps WHERE source = 'annotation'")
        self.assertEqual(steps[0]["n"], 5)
        ranks = sql(self.db, "SELECT rank, dp_size, tp_rank FROM step_ranks ORDER BY rank")
        self.assertEqual(ranks[-1], {"rank": 0, "dp_size": 1, "tp_rank": 0})

    def test_a_slowed_phase_on_one_rank_is_named_from_the_step_files_alone(self):
        # Sleeping phases, one rank after another: the timings stay steady while CTest runs other
        # tests on the same cores (busy-waiting ranks sharing 2 cores were too noisy to judge).
        run([sys.executable, TRAIN, "--ranks", "4", "--steps", "40", "--slow-rank", "2", "--slow-phase", "backward",
             "--slow-from", "20", "--slow-factor", "2.5", "--sleep", "--sequential", "--dump-dir", self.dump])
        self.assertEqual(len(os.listdir(self.dump)), 4)
        d = run([BIN, "diagnose", "--json", self.dump])
        self.assertEqual(d.returncode, 1, d.stdout + d.stderr)  # findings
        self.assertIn("4 step series", d.stderr)
        findings = json.loads(d.stdout)["findings"]
        named = [f for f in findings if f.get("ranks") == [2]]
        self.assertTrue(named, json.dumps(findings, indent=1))
        self.assertTrue(any("backward" in json.dumps(f) for f in named), json.dumps(named, indent=1))
        # No healthy rank is blamed.
        for f in findings:
            self.assertTrue(set(f.get("ranks", [])) <= {2}, json.dumps(f, indent=1))

    def test_the_library_is_visible_to_the_plugin_and_the_cupti_library(self):
        # They look the current step up by symbol in the whole process (dlsym of RTLD_DEFAULT).
        loop = textwrap.dedent("""
            import ctypes, collscope
            with collscope.step(7):
                assert collscope.enabled()
                step = ctypes.c_int64(-1)
                process = ctypes.CDLL(None)
                buf = ctypes.create_string_buffer(16)
                mb = ctypes.c_int32(0)
                assert process.collscope_annotate_current(ctypes.byref(step), buf, 16, ctypes.byref(mb)) == 0
                assert step.value == 7, step.value
        """)
        p = run([sys.executable, "-c", loop], env=dict(os.environ, COLLSCOPE_DUMP_DIR=self.dump))
        self.assertEqual(p.returncode, 0, p.stderr)

    def test_without_the_library_calls_are_no_ops_after_one_warning(self):
        loop = textwrap.dedent("""
            import warnings, collscope
            with warnings.catch_warnings(record=True) as w:
                warnings.simplefilter("always")
                with collscope.step(0):
                    with collscope.phase("forward"):
                        pass
                collscope.flush()
            assert not collscope.enabled()
            assert len(w) == 1 and "not found" in str(w[0].message), [str(x.message) for x in w]
        """)
        env = dict(os.environ, COLLSCOPE_ANNOTATE_LIB="/nonexistent/libcollscope-annotate.so",
                   COLLSCOPE_DUMP_DIR=self.dump)
        # The package must not find the build tree's library either: copy the package alone.
        pkg = os.path.join(self.tmp.name, "pkg")
        os.makedirs(os.path.join(pkg, "collscope"))
        import collscope as installed
        src = os.path.dirname(installed.__file__)
        for name in os.listdir(src):
            if name.endswith(".py"):
                with open(os.path.join(src, name)) as a, open(os.path.join(pkg, "collscope", name), "w") as b:
                    b.write(a.read())
        env["PYTHONPATH"] = pkg
        p = run([sys.executable, "-c", loop], env=env)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertFalse(os.path.exists(self.dump))


if __name__ == "__main__":
    unittest.main()
