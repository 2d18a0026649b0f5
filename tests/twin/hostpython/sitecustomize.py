"""Imported first by every python the twin's hosts run Ansible's modules with (./python beside
this file): the code compiled from a module's zip is kept by the digest of its source.

Ansible sends each module with the module_utils it imports in a zip, and python's zipimport
compiles every source it imports from a zip at every run: about a quarter of a second of CPU
per task for this collection's modules, thousands of times in a test run on two cores. Kept by
digest, the code is the same code; only its file name is set to the zip this run imports from,
as compiling it here would have named it. The test runs' ansible and ansible-playbook processes
keep the collection files they import here too (tests/support/controller/callback/
preloaded_plugins.py). A GPU host keeps nothing: bench/ runs its windows with the venv's python
itself, so its figures are a GPU host's.
"""

import hashlib
import marshal
import os
import sys
import zipimport

# the checkout's .build/twin/bytecode, which the twin's systemd hosts mount at the same path
CACHE = os.environ.get("LLMFLEET_TWIN_BYTECODE") or os.path.join(
    os.path.dirname(os.path.abspath(__file__)).rsplit("/tests/twin/hostpython", 1)[0], ".build", "twin", "bytecode")
_compile_source = zipimport._compile_source


def _named(code, filename):
    consts = tuple(_named(const, filename) if isinstance(const, type(code)) else const
                   for const in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def load_code(path):
    """The code kept at ``path``, or None."""
    try:
        with open(path, "rb") as kept:
            return marshal.load(kept)
    except (OSError, EOFError, ValueError, TypeError):
        return None


def keep_code(path, code):
    """Keep ``code`` at ``path`` (its folder private), whole or not at all."""
    import tempfile  # only here: importing it costs more than a kept module saves
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        handle, partial = tempfile.mkstemp(dir=os.path.dirname(path))
        with os.fdopen(handle, "wb") as out:
            marshal.dump(code, out)
        os.replace(partial, path)
    except OSError:
        pass  # a host that cannot keep it compiles it again next time


def kept_compile(pathname, source):
    """The code of ``source`` (bytes) as compile() would make it for ``pathname``: kept, or
    compiled and kept."""
    digest = hashlib.sha256(source).hexdigest()
    path = os.path.join(CACHE, "%s-%s.code" % (digest, sys.implementation.cache_tag))
    code = load_code(path)
    if code is not None:
        return _named(code, pathname)
    code = _compile_source(pathname, source)
    keep_code(path, code)
    return code


zipimport._compile_source = kept_compile
