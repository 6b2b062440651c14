# -*- Python -*-
import os

import lit.formats
from lit.llvm import llvm_config

config.name = "kiln"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.kiln_obj_root, "tests", "lit")
config.excludes = ["lit.cfg.py", "lit.site.cfg.py", "lit.site.cfg.py.in"]

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()
tool_dirs = [os.path.join(config.kiln_obj_root, "bin"), config.llvm_tools_dir]
llvm_config.add_tool_substitutions(["kiln-opt", "kiln-translate", "kilnc", "kiln-run"], tool_dirs)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
