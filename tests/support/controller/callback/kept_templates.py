"""The test runs' ansible and ansible-playbook processes keep the Python code Jinja compiles
from each template, by the digest of what it is compiled from.

Ansible compiles every template and conditional it renders, in every worker it forks (a worker
per task and host): Jinja parses the text, generates Python source and compiles it, about a
millisecond and a half a template, a quarter of a worker's CPU in a window and more in a plan
of many hosts. What comes out depends only on the text and on the settings the code generator
reads (the environment's lexer and code-generation settings, Ansible's backslash escaping, the
versions of Jinja, Ansible and Python), so the code is kept under a digest of all of them, in
the directory LLMFLEET_TEST_TEMPLATE_CACHE names, and the next worker of any run loads it
(marshal) instead, as the twin's hosts keep the modules' code (tests/twin/hostpython, whose
sitecustomize every python of a test run imports first). The template object is made from it
by Jinja's own ``from_code``, bound to the environment at hand, as ``from_string`` would make
it: filters, tests and globals are looked up when the template runs, never kept. A template
that does not compile is never kept, so its error is raised as before; Ansible's template
debugging (which writes the generated source to a file) bypasses the cache.
tests/conftest.py's ansible_env enables this for runs of the checkout's own collection;
tests/integration/test_twin_parts.py holds it to Jinja.
"""

from __future__ import annotations

import contextvars
import hashlib
import os
import sys

import jinja2
from jinja2 import nodes
from jinja2.environment import TemplateExpression
from jinja2.utils import internalcode

from ansible.module_utils.ansible_release import __version__ as ANSIBLE_VERSION
from ansible.plugins.callback import CallbackBase

try:  # the templating of ansible-core 2.19 and later; another core renders as it always has
    from ansible._internal._templating import _jinja_bits
    from sitecustomize import keep_code, load_code

    if not all(hasattr(_jinja_bits, name) for name in ("_TemplateCompileContext", "_TEMPLATE_OVERRIDE_FIELD_NAMES")) \
            or not hasattr(getattr(_jinja_bits, "_TemplateConfig", None), "allow_embedded_templates") \
            or not hasattr(getattr(_jinja_bits, "AnsibleEnvironment", None), "_debuggable_template_source"):
        _jinja_bits = None
except ImportError:
    _jinja_bits = keep_code = load_code = None

DOCUMENTATION = """
    name: kept_templates
    type: aggregate
    short_description: the test runs keep the code Jinja compiles from each template
    description:
      - Keeps the Python code of each compiled template and expression under LLMFLEET_TEST_TEMPLATE_CACHE.
    requirements:
      - enabled by tests/conftest.py's ansible_env
"""

_jinja_compile = jinja2.Environment.compile
_jinja_compile_expression = _jinja_bits.AnsibleEnvironment.compile_expression if _jinja_bits else None
# where compile() keeps the code of the expression compile_expression hands it as a parsed tree
_expression_path = contextvars.ContextVar("kept_templates_expression_path", default=None)


def settings(environment) -> tuple:
    """Everything besides the text that the code generated for a template depends on."""
    compiling = _jinja_bits._TemplateCompileContext.current(optional=True)
    finalize = environment.finalize
    return (
        ANSIBLE_VERSION, jinja2.__version__, sys.implementation.cache_tag, type(environment).__qualname__,
        environment.code_generator_class.__qualname__,
        tuple(getattr(environment, name) for name in _jinja_bits._TEMPLATE_OVERRIDE_FIELD_NAMES),
        compiling.escape_backslashes if compiling else None,
        bool(_jinja_bits._TemplateConfig.allow_embedded_templates),
        environment.optimized, repr(environment.autoescape), environment.is_async, environment.sandboxed,
        tuple(sorted(environment.extensions)),
        getattr(finalize, "__module__", None), getattr(finalize, "__qualname__", repr(finalize)),
        getattr(finalize, "jinja_pass_arg", None),
    )


def _path(environment, *what) -> str:
    digest = hashlib.sha256(repr((what, settings(environment))).encode())
    return os.path.join(os.environ["LLMFLEET_TEST_TEMPLATE_CACHE"], digest.hexdigest() + ".code")


@internalcode  # left out of a template error's traceback, as Jinja's compile is
def kept_compile(environment, source, name=None, filename=None, raw=False, defer_init=False):
    """jinja2.Environment.compile, with the code of a template's text, or of the expression
    being compiled, kept."""
    expression_path = _expression_path.get()
    _expression_path.set(None)  # only the tree compile_expression made
    if raw or environment._debuggable_template_source:
        return _jinja_compile(environment, source, name, filename, raw, defer_init)
    if isinstance(source, str):
        path = _path(environment, "template", str(source), name, filename, defer_init)
    elif isinstance(source, nodes.Template) and expression_path and name is None and filename is None:
        path = expression_path
    else:
        return _jinja_compile(environment, source, name, filename, raw, defer_init)
    code = load_code(path)
    if code is None:
        code = _jinja_compile(environment, source, name, filename, raw, defer_init)
        keep_code(path, code)
    return code


@internalcode
def kept_compile_expression(environment, source, undefined_to_none=True):
    """AnsibleEnvironment.compile_expression, from the kept code of the expression when there
    is some (made into a template as Jinja's compile_expression makes it)."""
    if environment._debuggable_template_source:
        return _jinja_compile_expression(environment, source, undefined_to_none)
    path = _path(environment, "expression", str(source))
    code = load_code(path)
    if code is not None:
        template = environment.template_class.from_code(environment, code, environment.make_globals(None), None)
        return TemplateExpression(template, undefined_to_none)
    token = _expression_path.set(path)
    try:
        return _jinja_compile_expression(environment, source, undefined_to_none)
    finally:
        _expression_path.reset(token)


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "kept_templates"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if _jinja_bits and os.environ.get("LLMFLEET_TEST_TEMPLATE_CACHE"):
            _jinja_bits.AnsibleEnvironment.compile = kept_compile
            _jinja_bits.AnsibleEnvironment.compile_expression = kept_compile_expression
