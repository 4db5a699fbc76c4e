"""What each known program can do: shipped data, and :func:`capabilities_of`.

Written here from each program's own manual, per capability of
:data:`~trajgrade.graders.protect.facts.CAPABILITIES`. A program the table
does not know has no entry: :func:`capabilities_of` answers None and the
policy's default posture decides it (strict: ask). ``docs/guard-programs.md``
is generated from this table (``tests/guard/test_protect_programs.py``).

Each entry also says how the program's operands (its non-option words) touch
files (:data:`ROLES`): ``read`` (cat FILE...), ``write`` (touch FILE...),
``delete`` (rm), ``copy`` (every operand read, the last written), ``move``
(every operand deleted, the last written), ``exec`` (the first operand is a
script it runs), ``none`` (no file operands: ``echo``'s words are text).
"""

from __future__ import annotations

from typing import Final

__all__ = ("PROGRAMS", "ROLES", "capabilities_of", "interpreter_flags", "role_of")

_R, _W, _N, _C, _P, _S = (
    frozenset({"read"}),
    frozenset({"write"}),
    frozenset({"network"}),
    frozenset({"run-code"}),
    frozenset({"privilege"}),
    frozenset({"signal"}),
)
_RW = _R | _W
_RN = _R | _N
_RC = _R | _C
_ALL = _R | _W | _N | _C  # package managers: install downloads and runs scripts


def _names(text: str) -> tuple[str, ...]:
    return tuple(text.split())


def _table(*rows: tuple[frozenset[str], str]) -> dict[str, frozenset[str]]:
    return {name: caps for caps, names in rows for name in _names(names)}


#: Program base name -> capabilities (before its arguments are looked at).
PROGRAMS: Final[dict[str, frozenset[str]]] = _table(
    (
        frozenset(),
        "echo printf true false test [ pwd date whoami id uname "
        "hostname sleep seq yes basename dirname expr which type command hash "
        "tty clear nproc arch locale printenv export cd pushd popd set unset "
        "shift exit return wait jobs read history umask ulimit",
    ),
    (
        _R,
        "cat tac head tail less more nl od xxd hexdump base64 base32 strings "
        "wc sort uniq cut paste join comm diff diff3 cmp grep egrep fgrep rg ag "
        "ack fd find locate ls tree stat file du df realpath readlink md5sum "
        "sha1sum sha256sum sha512sum b2sum cksum jq yq xmllint column fold fmt "
        "pr look iconv rev expand unexpand split csplit tr zcat zless bzcat "
        "xzcat lz4cat view vimdiff git-grep nm objdump readelf ldd lsof ps pgrep "
        "top free env",
    ),
    (
        _RW,
        "cp mv rm rmdir mkdir touch ln chmod chown chgrp truncate tee dd "
        "install shred unlink mktemp tar zip unzip gzip gunzip bzip2 xz unxz "
        "7z zstd rsync patch split sed",
    ),
    (_N, "ping traceroute dig nslookup host whois"),
    (
        _RN | _W,
        "curl wget aria2c http https httpie ftp lftp tftp scp sftp "
        "ssh nc ncat netcat socat telnet openssl rclone s3cmd gsutil aws az gcloud "
        "gh",
    ),
    (
        _RC | _W,
        "python python2 python3 pypy pypy3 perl ruby node nodejs deno bun "
        "php lua luajit Rscript tclsh wish osascript awk gawk mawk nawk sh bash "
        "zsh dash ksh mksh fish csh tcsh busybox pwsh ipython jupyter",
    ),
    (
        _RC | _W,
        "make gmake cmake ninja meson gradle gradlew mvn ant bazel "
        "pytest py.test tox nox jest vitest mocha ava karma playwright cypress "
        "rspec rake phpunit ctest xargs parallel watch find-exec vim vi nvim "
        "emacs ex ed",
    ),
    (
        _ALL | _W,
        "pip pip3 uv uvx poetry pipx conda mamba npm npx pnpm pnpx "
        "yarn gem bundle cargo go rustup composer apt apt-get dpkg brew snap "
        "git docker-compose",
    ),
    (
        _P,
        "sudo su doas pkexec run0 sudoedit systemd-run machinectl chroot "
        "nsenter unshare setpriv capsh runuser docker podman nerdctl ctr "
        "kubectl lxc incus",
    ),
    (_S, "kill pkill killall killall5 skill xkill fuser"),
)
# Versioned interpreters (python3.12, perl5.36, ...) are their base program.
_VERSIONED: Final = ("python", "pypy", "perl", "ruby", "php", "lua", "node")

#: How operands touch files (see the module docstring); unlisted: ``read``.
ROLES: Final[dict[str, str]] = {
    **dict.fromkeys(PROGRAMS, "read"),
    **dict.fromkeys(
        _names(
            "echo printf true false test [ pwd date whoami id uname hostname sleep "
            "seq yes basename dirname expr which type command hash tty clear nproc "
            "arch locale printenv export cd pushd popd set unset shift exit return "
            "wait jobs read history umask ulimit ping traceroute dig nslookup host "
            "whois kill pkill killall killall5 skill xkill fuser curl wget ssh nc "
            "ncat netcat socat telnet git pip pip3 uv npm npx pnpm yarn cargo go "
            "apt apt-get brew make sudo su doas docker podman kubectl"
        ),
        "none",
    ),
    **dict.fromkeys(_names("rm rmdir unlink shred"), "delete"),
    **dict.fromkeys(_names("touch mkdir truncate chmod chown chgrp tee"), "write"),
    **dict.fromkeys(_names("cp install ln rsync scp"), "copy"),
    "mv": "move",
    **dict.fromkeys(
        _names(
            "python python2 python3 pypy pypy3 perl ruby node nodejs deno bun php "
            "lua luajit Rscript tclsh sh bash zsh dash ksh mksh fish csh tcsh "
            "source ."
        ),
        "exec",
    ),
}

#: Interpreters' options whose next word is code, not a file.
_CODE_FLAGS: Final[dict[str, tuple[str, ...]]] = {
    **dict.fromkeys(("python", "python2", "python3", "pypy", "pypy3"), ("-c",)),
    **dict.fromkeys(("perl", "ruby"), ("-e", "-E")),
    **dict.fromkeys(
        ("node", "nodejs", "deno", "bun"), ("-e", "--eval", "-p", "--print")
    ),
    "php": ("-r",),
    **dict.fromkeys(("lua", "luajit"), ("-e",)),
    "Rscript": ("-e",),
    "osascript": ("-e",),
}
#: git's ways to run code it is given: ``-c`` keys and options.
_GIT_CODE: Final = (
    "alias.",
    "core.pager",
    "core.sshcommand",
    "core.fsmonitor",
    "core.hookspath",
    "core.editor",
    "diff.external",
    "pager.",
    "sequence.editor",
    "credential.helper",
    "protocol.ext.allow",
    "gpg.program",
    "filter.",
)
_GIT_NETWORK: Final = frozenset(
    _names(
        "clone fetch pull push ls-remote submodule remote archive request-pull send-email"
    )
)
_PIP_NETWORK: Final = frozenset(
    _names("install download wheel add sync update upgrade i ci exec dlx")
)


def _base(name: str) -> str:
    for stem in _VERSIONED:
        if name.startswith(stem) and name[len(stem) :].replace(".", "").isdigit():
            return stem if stem != "python" else "python3"
    return name


def role_of(name: str) -> str:
    """How ``name``'s operands touch files."""
    return ROLES.get(_base(name), "read")


def interpreter_flags(name: str) -> tuple[str, ...]:
    """The options of interpreter ``name`` whose next word is code."""
    return _CODE_FLAGS.get(_base(name), ())


def capabilities_of(
    name: str, argv: tuple[str, ...] | list[str]
) -> frozenset[str] | None:
    """What ``name`` run with ``argv`` (its words, the program first) can
    do; None: a program the table does not know."""
    base = _base(name)
    caps = PROGRAMS.get(base)
    if caps is None:
        return None
    args = [a.lower() for a in argv[1:]]
    if base == "git":
        return _git(args)
    if base in ("sed", "gsed") and any(
        a.startswith("-i") or a == "--in-place" for a in args
    ):
        return _RW
    if base == "find":
        if any(a in ("-exec", "-execdir", "-ok", "-okdir") for a in args):
            return _RC | _W
        if any(a in ("-delete", "-fprint", "-fprintf", "-fls") for a in args):
            return _RW
        return _R
    if base in (
        "pip",
        "pip3",
        "uv",
        "poetry",
        "npm",
        "pnpm",
        "yarn",
        "gem",
        "cargo",
        "go",
        "composer",
        "bundle",
    ):
        return _package(args)
    return caps


def _git(args: list[str]) -> frozenset[str]:
    caps = set(_RW)
    for i, a in enumerate(args):
        if a == "-c" and i + 1 < len(args) and args[i + 1].startswith(_GIT_CODE):
            caps |= _C
        if a.startswith(("--upload-pack", "--receive-pack", "--exec", "--config-env")):
            caps |= _C
    sub = next((a for a in args if not a.startswith("-") and "=" not in a), "")
    if sub in _GIT_NETWORK or "://" in " ".join(args):
        caps |= _N
    if sub in (
        "difftool",
        "mergetool",
        "bisect",
        "filter-branch",
        "rebase",
        "submodule",
    ):
        caps |= _C
    return frozenset(caps)


def _package(args: list[str]) -> frozenset[str]:
    sub = next((a for a in args if not a.startswith("-")), "")
    caps = set(_RW)
    if sub in _PIP_NETWORK:
        caps |= _N | _C  # installing runs build scripts and post-install hooks
    elif sub in ("run", "test", "exec", "start", "build", "x", "script", "tox"):
        caps |= _C
    return frozenset(caps)
