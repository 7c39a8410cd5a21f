"""get_config of the stbt API: built-in defaults, .stbt.conf, config/stbt.conf,
the run's configuration, the node's config/test-farm/<node_id>.conf and
STBT_CONFIG_FILE, in that order, plus result.tags; set_config and the merged
parser of _stbt.config, its all-at-once file writer; types and errors."""

import enum
import json
import os
import shutil
import tempfile
import unittest

import stbt
from stbt_core import _config
from _env import restore_env

FILES = {
    ".stbt.conf": "[global]\nwho = dot\nonly_dot = 1\n[match]\nmatch_threshold = 0.5\n",
    "config/stbt.conf": "[global]\nwho = config\nonly_config = yes\nCamel = Case\n[match]\nmatch_threshold = 0.9\n"
                        "[custom]\nmode = fast\nratio = 2.5\ncount = x\n",
    "config/test-farm/node-7.conf": "[global]\nwho = node\n",
    "config/test-farm/other.conf": "[global]\nwho = other\n",
}


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


class Mode(enum.Enum):
    FAST = "fast"
    SLOW = "slow"


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class GetConfig(unittest.TestCase):
    def setUp(self):
        self.root = tempfile.mkdtemp(prefix="stbt-config-")
        for name, text in FILES.items():
            path = os.path.join(self.root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(text)
        self.saved = {k: os.environ.get(k) for k in ("FARMHAND_TEST_PACK_DIR", "FARMHAND_NODE_ID", "FARMHAND_CONFIG",
                                                     "STBT_CONFIG_FILE", "FARMHAND_REPORT", "XDG_CONFIG_HOME", "HOME")}
        os.environ["FARMHAND_TEST_PACK_DIR"] = self.root
        os.environ.pop("FARMHAND_NODE_ID", None)
        os.environ.pop("FARMHAND_CONFIG", None)
        os.environ.pop("STBT_CONFIG_FILE", None)
        # A farmhand run whose home (the daemon's) is outside the run's folder: no per-user file.
        os.environ["FARMHAND_REPORT"] = os.path.join(self.root, "run", "report.json")
        os.environ["XDG_CONFIG_HOME"] = os.path.join(self.root, "daemon-home", ".config")
        _config._reset()  # pylint: disable=protected-access

    def tearDown(self):
        shutil.rmtree(self.root, True)
        restore_env(self.saved)
        _config._reset()  # pylint: disable=protected-access

    def test_layers(self):
        self.assertEqual(stbt.get_config("global", "who"), "config")  # config/stbt.conf over .stbt.conf
        self.assertEqual(stbt.get_config("global", "only_dot"), "1")
        self.assertEqual(stbt.get_config("global", "only_config", type_=bool), True)
        self.assertEqual(stbt.get_config("match", "match_threshold", type_=float), 0.9)
        self.assertEqual(stbt.get_config("press", "interpress_delay_secs", type_=float), 0.3)  # built in
        self.assertEqual(stbt.get_config("global", "camel"), "Case")  # keys are case-insensitive

    def test_node_config_is_over_the_pack(self):
        os.environ["FARMHAND_NODE_ID"] = "node-7"
        _config._reset()  # pylint: disable=protected-access
        self.assertEqual(stbt.get_config("global", "who"), "node")
        self.assertEqual(stbt.get_config("global", "only_config"), "yes")

    def test_node_id_cannot_reach_outside_test_farm(self):
        os.environ["FARMHAND_NODE_ID"] = "../stbt"
        _config._reset()  # pylint: disable=protected-access
        self.assertEqual(stbt.get_config("global", "who"), "config")

    def test_run_config_and_tags(self):
        path = os.path.join(self.root, "run.json")
        with open(path, "w") as f:
            json.dump({"global": {"who": "farmhand.conf"}, "result.tags": {"jenkins/BUILD_ID": "42"}}, f)
        os.environ["FARMHAND_CONFIG"] = path
        os.environ["FARMHAND_NODE_ID"] = "node-7"
        _config._reset()  # pylint: disable=protected-access
        self.assertEqual(stbt.get_config("global", "who"), "node")
        self.assertEqual(stbt.get_config("result.tags", "jenkins/BUILD_ID", type_=int), 42)
        os.environ.pop("FARMHAND_NODE_ID")
        _config._reset()  # pylint: disable=protected-access
        self.assertEqual(stbt.get_config("global", "who"), "farmhand.conf")

    def test_types_defaults_and_errors(self):
        self.assertIs(stbt.get_config("custom", "mode", type_=Mode), Mode.FAST)
        self.assertEqual(stbt.get_config("custom", "ratio", type_=float), 2.5)
        self.assertEqual(stbt.get_config("custom", "missing", default=None), None)
        self.assertEqual(stbt.get_config("nosection", "missing", default=3), 3)
        with self.assertRaises(stbt.ConfigurationError):
            stbt.get_config("custom", "missing")
        with self.assertRaises(stbt.ConfigurationError):
            stbt.get_config("custom", "count", type_=int)
        self.assertTrue(issubclass(stbt.ConfigurationError, stbt.UITestError))

    def test_stbt_config_file_and_set_config(self):
        first, second = os.path.join(self.root, "new", "first.conf"), os.path.join(self.root, "second.conf")
        with open(second, "w") as f:
            f.write("[global]\nwho = second\nonly_second = 2\n")
        os.environ["STBT_CONFIG_FILE"] = "%s:%s" % (first, second)
        _config._reset()  # pylint: disable=protected-access
        self.assertEqual(stbt.get_config("global", "who"), "second")  # over the pack's files
        _config.set_config("global", "who", "first")  # written to the first file, which wins
        self.assertEqual(stbt.get_config("global", "who"), "first")
        self.assertEqual(stbt.get_config("global", "only_second"), "2")
        self.assertIn("who = first", read(first))
        self.assertEqual(_config._config_init().get("global", "who"), "first")  # pylint: disable=protected-access
        os.environ.pop("STBT_CONFIG_FILE")
        parser = _config._config_init(force=True)  # pylint: disable=protected-access
        self.assertEqual(parser.get("global", "who"), "config")
        self.assertIsNone(parser.get("android", "adb_server", fallback=None))

    def test_set_config_outside_a_run_writes_the_per_user_file_creating_its_folders(self):
        # As stb-tester: no STBT_CONFIG_FILE, so $XDG_CONFIG_HOME/stbt/stbt.conf, read over the pack's files.
        os.environ.pop("FARMHAND_REPORT")
        home = os.path.join(self.root, "home")
        os.environ["XDG_CONFIG_HOME"] = os.path.join(home, "xdg")
        _config.set_config("custom", "mode", "slow")
        user_file = os.path.join(home, "xdg", "stbt", "stbt.conf")
        self.assertIn("mode = slow", read(user_file))
        _config._reset()  # pylint: disable=protected-access  (another process reads the file again)
        self.assertIs(stbt.get_config("custom", "mode", type_=Mode), Mode.SLOW)
        self.assertEqual(stbt.get_config("custom", "ratio"), "2.5")  # the pack's other keys still there
        _config.set_config("custom", "mode", None)
        self.assertNotIn("mode", read(user_file))
        self.assertIs(stbt.get_config("custom", "mode", type_=Mode), Mode.FAST)
        # Without XDG_CONFIG_HOME: $HOME/.config.
        os.environ.pop("XDG_CONFIG_HOME")
        os.environ["HOME"] = home
        _config.set_config("global", "who", "me")
        self.assertIn("who = me", read(os.path.join(home, ".config", "stbt", "stbt.conf")))

    def test_set_config_in_a_run_with_its_own_home_writes_the_file_there(self):
        # A run as the test user: HOME is the run's folder, so the per-user file lives and dies with the run.
        run = os.path.join(self.root, "run")
        os.environ.pop("XDG_CONFIG_HOME")
        os.environ["HOME"] = run
        _config.set_config("custom", "mode", "slow")
        self.assertIn("mode = slow", read(os.path.join(run, ".config", "stbt", "stbt.conf")))
        _config._reset()  # pylint: disable=protected-access
        self.assertIs(stbt.get_config("custom", "mode", type_=Mode), Mode.SLOW)
        self.assertFalse(os.path.exists(os.path.join(self.root, "daemon-home")))

    def test_set_config_without_a_file_lasts_for_the_process(self):
        # In a run whose home is the daemon's (shared by every run): nothing written there.
        _config.set_config("custom", "mode", "slow")
        try:
            self.assertIs(stbt.get_config("custom", "mode", type_=Mode), Mode.SLOW)
        finally:
            _config.set_config("custom", "mode", None)
        self.assertIs(stbt.get_config("custom", "mode", type_=Mode), Mode.FAST)
        self.assertFalse(os.path.exists(os.path.join(self.root, "daemon-home")))

    def test_set_config_without_a_file_is_under_a_stbt_config_file_set_later(self):
        _config.set_config("custom", "mode", "slow")
        try:
            later = os.path.join(self.root, "later.conf")
            with open(later, "w") as f:
                f.write("[custom]\nmode = fast\n")
            os.environ["STBT_CONFIG_FILE"] = later
            _config._reset()  # pylint: disable=protected-access
            self.assertIs(stbt.get_config("custom", "mode", type_=Mode), Mode.FAST)  # the file wins
            os.environ.pop("STBT_CONFIG_FILE")
            _config._reset()  # pylint: disable=protected-access
            self.assertIs(stbt.get_config("custom", "mode", type_=Mode), Mode.SLOW)
        finally:
            _config.set_config("custom", "mode", None)

    def test_an_enum_value_by_number_and_the_valid_names_in_the_error(self):
        path = os.path.join(self.root, "levels.conf")
        with open(path, "w") as f:
            f.write("[levels]\nnumber = 2\nname = low\nwrong = 3\nmode = medium\n")
        os.environ["STBT_CONFIG_FILE"] = path
        _config._reset()  # pylint: disable=protected-access
        self.assertIs(stbt.get_config("levels", "number", type_=Level), Level.HIGH)
        self.assertIs(stbt.get_config("levels", "name", type_=Level), Level.LOW)
        with self.assertRaisesRegex(stbt.ConfigurationError, "Valid values are LOW, HIGH"):
            stbt.get_config("levels", "wrong", type_=Level)
        with self.assertRaisesRegex(stbt.ConfigurationError, "Valid values are FAST, SLOW"):
            stbt.get_config("levels", "mode", type_=Mode)

    def test_sponge_replaces_the_file_only_when_the_block_ends_well(self):
        path = os.path.join(self.root, "written.conf")
        with _config._sponge(path) as f:  # pylint: disable=protected-access
            f.write("[a]\nb = 1\n")
        self.assertEqual(read(path), "[a]\nb = 1\n")
        with self.assertRaises(RuntimeError):
            with _config._sponge(path) as f:  # pylint: disable=protected-access
                f.write("[half")
                raise RuntimeError("stopped half way")
        self.assertEqual(read(path), "[a]\nb = 1\n")
        self.assertEqual([n for n in os.listdir(self.root) if n.startswith(".written")], [])  # no leftovers

    def test_a_broken_file_is_a_configuration_error(self):
        with open(os.path.join(self.root, "config", "stbt.conf"), "w") as f:
            f.write("no section here\n")
        _config._reset()  # pylint: disable=protected-access
        with self.assertRaises(stbt.ConfigurationError):
            stbt.get_config("global", "who")


if __name__ == "__main__":
    unittest.main()
