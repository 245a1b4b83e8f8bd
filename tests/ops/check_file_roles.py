#!/usr/bin/env python3
"""Checks the file-role rule of the op families (docs/guides/adding_an_op.md, issue 41).

Walks dtensor/ops/<family>/ and fails, naming file and rule, when
  - a file's name has no known role: <part>[_<word>]<role>, role one of .h .cc _cpu.cc _cuda.cu
    _no_cuda.cc _strategy.cc _backward.cc _dtensor.cc, <part> the family or a part of it (ops
    with their own registration, <part>_strategy.cc), internal headers under detail/;
  - a kernel file (_cpu.cc, _cuda.cu, _no_cuda.cc) defines a function in namespace dtensor
    (public API) or registers an op (OpInfo, Registry);
  - a _strategy.cc holds a backward formula (BackwardContext) or a DTensor function;
  - a public-function file (.cc) registers an op, holds a backward formula or a DTensor function;
  - a _backward.cc registers an op or defines a public function; a _dtensor.cc registers an op or
    holds a backward formula;
  - a public header (not under detail/) includes a detail/ header or declares namespace detail.
Usage: check_file_roles.py <source root>. Exit 0 when the rule holds.
"""
import os
import re
import sys

ROLES = ['_no_cuda.cc', '_cpu.cc', '_cuda.cu', '_strategy.cc', '_backward.cc', '_dtensor.cc',
         '.cc', '.h']
KERNEL_ROLES = ('_cpu.cc', '_cuda.cu', '_no_cuda.cc')
# Build files of a family folder: none (dtensor/ops/CMakeLists.txt reads the sources from the file
# names); a sources.cmake left in a folder is an unknown suffix.
BUILD_FILES = set()
# The BLAS backends of matmul (loaders of a third-party library, their declarations under
# detail/, and blas_info.h, the public report of what runs): named after the library, not after
# an op role. Exempt from the naming rule only: blas_info.h is checked as a public header.
BACKEND_FILES = {'matmul': {'openblas.cc', 'onednn.cc', 'blas_info.h'}}

# Files that still break the rule, with the rule they break: the test fails on any other
# violation, and on an entry here that no longer breaks it (remove the entry). Empty since issue
# 41 moved the last public Tensor functions out of *_cpu.cc and backward formulas out of
# *_strategy.cc; an entry is a known, explained exception, e.g. {'family/file.cc': ('rule',)}.
PENDING = {}


def strip_code(text):
    """The text with comments, string and char literals blanked (line breaks kept)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith('//', i):
            j = text.find('\n', i)
            j = n if j < 0 else j
            i = j
        elif text.startswith('/*', i):
            j = text.find('*/', i + 2)
            j = n if j < 0 else j + 2
            out.append('\n' * text.count('\n', i, j))
            i = j
        elif c == 'R' and text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(')' + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append('""' + '\n' * text.count('\n', i, j))
            i = j
        elif c in '"\'':
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == '\\' else 1
            out.append(c + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return ''.join(out)


def functions(code):
    """(namespaces, head) for each function defined at namespace scope."""
    # Preprocessor lines (continued ones included) are not declarations.
    code = re.sub(r'^[ \t]*#(?:.*\\\n)*.*$', '', code, flags=re.M)
    stack = []  # one entry per open brace: a namespace name, or None
    found = []
    last = 0  # where the current declaration starts
    for m in re.finditer(r'[{};]', code):
        ch = m.group()
        if ch == '{':
            head = code[last:m.start()].strip()
            ns = re.match(r'^(?:inline\s+)?namespace\s*([\w:]*)\s*$', head)
            if ns is not None:
                stack.append(ns.group(1) or '<anonymous>')
            else:
                if all(s is not None for s in stack) and is_function_head(head):
                    found.append(('::'.join(stack), head))
                stack.append(None)
            last = m.end()
        elif ch == '}':
            if stack:
                stack.pop()
            last = m.end()
        else:
            if all(s is not None for s in stack):
                last = m.end()
    return found


def is_function_head(head):
    head = re.sub(r'^(?:\s*#.*\n)+', '', head + '\n').strip()
    if not head.endswith(')') and not re.search(r'\)\s*(const|noexcept|override|->.*)\s*$', head):
        return False
    if re.match(r'^(struct|class|enum|union|extern|template\s*<[^>]*>\s*(struct|class))\b', head):
        return False
    before = head.split('(', 1)[0]
    if '=' in before or not re.search(r'\w\s*$', before):
        return False
    return bool(re.search(r'[\w:~]+\s*$', before))


def is_public(namespaces):
    parts = [p for n in namespaces.split('::') for p in n.split('::')]
    return parts[:1] == ['dtensor'] and 'detail' not in parts and '<anonymous>' not in parts \
        and not any(p.startswith('HWY') for p in parts)


def fn_name(head):
    return re.search(r'([\w:~]+)\s*$', head.split('(', 1)[0]).group(1)


def check_file(path, family, name, role, errors):
    text = open(path, encoding='utf-8').read()
    code = strip_code(text)
    # Registration: a Registry, an OpInfo built (not one looked up: `const OpInfo& op = ops_op(..)`).
    registers = re.search(r'\bRegistry\b|\bregister_op\s*\(|\bOpInfo\s+\w+\s*[;={(]', code) is not None
    backward = re.search(r'\bBackwardContext\b', code) is not None
    fns = functions(code)
    public = [(ns, h) for ns, h in fns if is_public(ns)]
    rel = f'{family}/{name}'

    def err(rule, what):
        errors.append((rel, rule, what))

    if role == '.h':
        for inc in re.findall(r'#include\s+"([^"]+)"', text):
            if '/detail/' in inc:
                err('public-header-includes-detail', inc)
        if re.search(r'\bnamespace\s+(\w+::)*detail\b', code):
            err('public-header-declares-detail', 'namespace detail')
        return
    if role in KERNEL_ROLES:
        for _, h in public:
            err('kernel-defines-public', fn_name(h))
        if registers:
            err('kernel-registers', 'OpInfo/Registry')
    elif role == '_strategy.cc':
        if backward:
            err('strategy-holds-backward', 'BackwardContext')
        for _, h in public:
            if not re.match(r'register_\w+$', fn_name(h)):
                err('strategy-defines-public', fn_name(h))
    elif role == '.cc':
        if registers:
            err('public-file-registers', 'OpInfo/Registry')
        if backward:
            err('public-file-holds-backward', 'BackwardContext')
        for _, h in public:
            if re.search(r'\bDTensor', h):
                err('public-file-defines-dtensor', fn_name(h))
    elif role == '_backward.cc':
        if registers:
            err('backward-registers', 'OpInfo/Registry')
        for _, h in public:
            err('backward-defines-public', fn_name(h))
    elif role == '_dtensor.cc':
        if registers:
            err('dtensor-file-registers', 'OpInfo/Registry')
        if backward:
            err('dtensor-file-holds-backward', 'BackwardContext')


def role_of(name):
    for r in ROLES:
        if name.endswith(r):
            return r, name[:-len(r)]
    return None, None


def main(root):
    ops = os.path.join(root, 'dtensor', 'ops')
    errors = []
    families = sorted(d for d in os.listdir(ops) if os.path.isdir(os.path.join(ops, d)))
    for family in families:
        folder = os.path.join(ops, family)
        if family == 'common':
            # Cross-family helpers: sources and the internal headers under common/detail/.
            for name in sorted(os.listdir(folder)):
                if os.path.isdir(os.path.join(folder, name)):
                    if name != 'detail':
                        errors.append((f'common/{name}', 'unknown-folder', 'only detail/'))
                elif name.endswith('.h') or name.endswith('.cuh'):
                    errors.append((f'common/{name}', 'common-header-not-internal',
                                   'cross-family helpers live in common/detail/'))
                elif not (name.endswith('.cc') or name.endswith('.cu') or name in BUILD_FILES):
                    errors.append((f'common/{name}', 'unknown-suffix', name))
            continue
        names = sorted(os.listdir(folder))
        # A part registers its own ops (<part>_strategy.cc); its public header is optional.
        parts = {family} | {n[:-len('_strategy.cc')] for n in names if n.endswith('_strategy.cc')}
        for name in names:
            path = os.path.join(folder, name)
            if os.path.isdir(path):
                if name != 'detail':
                    errors.append((f'{family}/{name}', 'unknown-folder',
                                   'a sub-family gets its own family folder'))
                continue
            if name in BUILD_FILES:
                continue
            if name in BACKEND_FILES.get(family, ()):
                if name.endswith('.h'):
                    check_file(path, family, name, '.h', errors)
                continue
            role, stem = role_of(name)
            part = None
            if role is not None:
                if role == '.h':
                    part = stem if stem in parts else None
                else:
                    part = next((p for p in sorted(parts, key=len, reverse=True)
                                 if stem == p or stem.startswith(p + '_')), None)
            if part is None:
                errors.append((f'{family}/{name}', 'unknown-suffix',
                               'not <part>[_<word>]<role> of ' + ', '.join(sorted(parts))))
                continue
            check_file(path, family, name, role, errors)
    failed = False
    seen = set()
    for rel, rule, what in errors:
        seen.add((rel, rule))
        if rule in PENDING.get(rel, ()):
            continue
        print(f'dtensor/ops/{rel}: breaks {rule} ({what})')
        failed = True
    for rel, rules in PENDING.items():
        for rule in rules:
            if (rel, rule) not in seen:
                print(f'dtensor/ops/{rel}: no longer breaks {rule}: remove it from PENDING')
                failed = True
    pending = sum(len(r) for r in PENDING.values())
    print(f'file roles: {len(families)} family folders, {pending} pending exceptions, '
          f'{"FAILED" if failed else "ok"}')
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else '.'))
