"""The OS walls around generated code: one declarative policy, applied before it runs.

A candidate's process (and the builder that compiles a load_inline candidate) confines
itself with `confine(policy)` after its fork and before it imports or loads anything of
the candidate's. Each wall is the kernel's, not a check in Python a candidate could
patch, and each is irreversible for the process and everything it starts:

- rlimits: no core dumps, a cap on written file size and open descriptors;
- the user: root drops to nobody (65534) when every path the policy reads is reachable by
  other users; otherwise it keeps uid 0 but gives up every capability (effective,
  permitted, inheritable and the bounding set), so it is an ordinary owner of root's
  files, which Landlock then hides;
- PR_SET_NO_NEW_PRIVS: nothing it executes gains privileges (set-uid files, file caps);
- Landlock (ABI 1+; network rules from ABI 4, scopes from ABI 6): the file tree is
  read-only where the policy says, read-write only in its own scratch folder and the
  device files, invisible elsewhere; no TCP bind or connect; no signals to, and no
  abstract unix sockets of, processes outside its domain; ptrace and /proc/<pid>/mem of
  processes outside its domain are refused by Landlock itself;
- seccomp-bpf (through libseccomp, the C library that systemd and apt use, so it is on
  every Debian/Ubuntu host): no ptrace, process_vm_readv/writev, pidfd signals or
  descriptor theft; kill/tgkill/sigqueue only to itself; no execve, fork or clone of a
  process (threads are fine: CUDA and torch start threads); no mount, keyctl, bpf,
  unshare, setns, perf_event_open, userfaultfd, io_uring, module or kexec calls; sockets of
  AF_UNIX only, and no connect or accept at all (ECONNREFUSED), since Landlock does not
  mediate connecting to a unix socket by its path (bind and listen stay: CUDA's driver
  needs them). The filter is synchronised to every thread (TSYNC).

docs/threat-model.md says which attack each wall stops and what is still open.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import logging
import os
import resource
import stat
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

NOBODY = 65534
NO_SANDBOX_FLAG = "--no-sandbox"
# Whether generated code is confined when no --sandbox/--no-sandbox is given: the default of
# every command that judges (htam eval, optimize, bench, catalog record) and of
# EvalConfig.sandbox, here alone. On since 2026-12-06: bench/scripts/sandbox_gpu_check.sh passes
# on the GPU and the runner bench, confined, runs at 0.91x of its unconfined throughput, 1.0x
# after the lazy prebuilt loader (ABBA, H100; bench/results/sandbox-2026-12-06-h100-start).
ON_BY_DEFAULT = True
UNCONFINED = "generated code runs with this user's privileges"  # what unconfined judging says

# --- Landlock (include/uapi/linux/landlock.h) -------------------------------------------
_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446  # the same on x86_64 and arm64
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH, _RULE_NET_PORT = 1, 2
_FS_EXECUTE = 1 << 0
_FS_WRITE_FILE = 1 << 1
_FS_READ_FILE = 1 << 2
_FS_READ_DIR = 1 << 3
_FS_REMOVE_DIR = 1 << 4
_FS_REMOVE_FILE = 1 << 5
_FS_MAKE_CHAR = 1 << 6
_FS_MAKE_DIR = 1 << 7
_FS_MAKE_REG = 1 << 8
_FS_MAKE_SOCK = 1 << 9
_FS_MAKE_FIFO = 1 << 10
_FS_MAKE_BLOCK = 1 << 11
_FS_MAKE_SYM = 1 << 12
_FS_REFER = 1 << 13  # ABI 2
_FS_TRUNCATE = 1 << 14  # ABI 3
_FS_IOCTL_DEV = 1 << 15  # ABI 5
_NET_BIND_TCP, _NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
_SCOPE_ABSTRACT_UNIX, _SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6

_FS_READ = _FS_EXECUTE | _FS_READ_FILE | _FS_READ_DIR
_FS_WRITE = (
    _FS_WRITE_FILE
    | _FS_REMOVE_DIR
    | _FS_REMOVE_FILE
    | _FS_MAKE_DIR
    | _FS_MAKE_REG
    | _FS_MAKE_SOCK
    | _FS_MAKE_FIFO
    | _FS_MAKE_SYM
    | _FS_REFER
    | _FS_TRUNCATE
)
_FS_DEVICE = _FS_READ_FILE | _FS_WRITE_FILE | _FS_IOCTL_DEV | _FS_TRUNCATE
_FILE_RIGHTS = _FS_EXECUTE | _FS_READ_FILE | _FS_WRITE_FILE | _FS_TRUNCATE | _FS_IOCTL_DEV


def _fs_rights(abi: int) -> int:
    """Every file-system right the kernel's Landlock ABI knows: all of them are handled."""
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= _FS_REFER
    if abi >= 3:
        rights |= _FS_TRUNCATE
    if abi >= 5:
        rights |= _FS_IOCTL_DEV
    return rights


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is missing or disabled."""
    if not sys.platform.startswith("linux"):
        return 0
    version = _libc.syscall(_SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(int(version), 0)


def _landlock_ruleset(policy: Policy, abi: int) -> int:
    """The ruleset's descriptor, built while this process may still open every path."""
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, _NET_BIND_TCP | _NET_CONNECT_TCP if abi >= 4 else 0, 0)
    if abi >= 6:
        attr.scoped = _SCOPE_ABSTRACT_UNIX | _SCOPE_SIGNAL
    size = 24 if abi >= 6 else 16 if abi >= 4 else 8
    ruleset = _libc.syscall(_SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        raise SandboxError(f"landlock_create_ruleset failed: {os.strerror(ctypes.get_errno())}")
    try:
        for paths, rights in (
            (policy.listable, _FS_READ_DIR),
            (policy.read, _FS_READ),
            (policy.write, _FS_READ | _FS_WRITE),
            (policy.devices, _FS_DEVICE),
        ):
            for path in paths:
                _allow(ruleset, path, rights & handled)
    except BaseException:
        os.close(ruleset)
        raise
    return ruleset


def _landlock_restrict(ruleset: int) -> None:
    try:
        if _libc.syscall(_SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            raise SandboxError(f"landlock_restrict_self failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(ruleset)


def _allow(ruleset: int, path: Path, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except FileNotFoundError:
        return  # a path this machine lacks (e.g. /lib64): nothing to allow
    try:
        if not stat.S_ISDIR(os.fstat(fd).st_mode):
            rights &= _FILE_RIGHTS  # directory rights on a file are EINVAL
        rule = _PathBeneathAttr(rights, fd)
        if _libc.syscall(_SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(_RULE_PATH_BENEATH), ctypes.byref(rule), 0):
            raise SandboxError(f"landlock_add_rule({path}) failed: {os.strerror(ctypes.get_errno())}")
    finally:
        os.close(fd)


# --- seccomp, through libseccomp ------------------------------------------------------
_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_FLTATR_CTL_TSYNC = 4
_SCMP_CMP_NE, _SCMP_CMP_MASKED_EQ = 1, 7
_CLONE_THREAD = 0x00010000
_AF_UNIX = 1


def _errno_action(code: int) -> int:
    return 0x00050000 | code


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


# Denied outright (EPERM): reaching other processes, the kernel's administration, new
# namespaces or privileges, and kernel interfaces that have been a rich source of exploits.
_DENIED = (
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "process_madvise",
    "kcmp",
    "pidfd_open",
    "pidfd_getfd",
    "pidfd_send_signal",
    "tkill",
    "mount",
    "umount2",
    "mount_setattr",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "pivot_root",
    "chroot",
    "unshare",
    "setns",
    "keyctl",
    "add_key",
    "request_key",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "init_module",
    "finit_module",
    "delete_module",
    "kexec_load",
    "kexec_file_load",
    "reboot",
    "swapon",
    "swapoff",
    "syslog",
    "acct",
    "quotactl",
    "open_by_handle_at",
    "name_to_handle_at",
    "fanotify_init",
    "iopl",
    "ioperm",
    "personality",
    "setuid",
    "setgid",
    "setreuid",
    "setregid",
    "setresuid",
    "setresgid",
    "setgroups",
    "setfsuid",
    "setfsgid",
    "capset",
)
# No connection of its own: Landlock does not mediate connect() to a unix socket by its
# path (a docker.sock, say); the judge's channel is a socket pair it inherited, open
# already. Refused as a missing server is (ECONNREFUSED), so a library that probes for a
# daemon (CUDA's MPS, say) carries on as if there were none. bind and listen stay allowed:
# CUDA's driver fails to start without them (error 304; bench/scripts/sandbox_cuda_smoke.py
# --sockets, H100, 2026-12-05). A socket by path needs Landlock's make-socket right (its
# scratch folder only); one by abstract name can be bound but never accepts a connection.
_CONNECTING = ("connect", "accept", "accept4")
_PROCESS_START = ("execve", "execveat", "fork", "vfork")


@functools.cache  # found and loaded once (find_library runs ldconfig): a fork server's processes inherit it
def _libseccomp() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.POINTER(_ArgCmp),
    ]
    lib.seccomp_attr_set.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32]
    lib.seccomp_load.argtypes = [ctypes.c_void_p]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    return lib


def _seccomp(policy: Policy) -> None:
    lib = _libseccomp()
    if lib is None:
        raise SandboxError("libseccomp.so.2 not found")
    ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
    if not ctx:
        raise SandboxError("seccomp_init failed")
    me = os.getpid()

    def rule(action: int, name: str, *cmps: tuple[int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:
            return  # a call this architecture does not have
        args = (_ArgCmp * max(len(cmps), 1))(*(_ArgCmp(a, op, d, 0) for a, op, d in cmps))
        if rc := lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), args):
            raise SandboxError(f"seccomp rule for {name} failed: {os.strerror(-rc)}")

    try:
        deny = _errno_action(errno.EPERM)
        for name in _DENIED:
            rule(deny, name)
        if not policy.allow_exec:
            for name in _PROCESS_START:
                rule(deny, name)
            rule(deny, "clone", (0, _SCMP_CMP_MASKED_EQ, _CLONE_THREAD))  # a process, not a thread
            rule(_errno_action(errno.ENOSYS), "clone3")  # flags behind a pointer: glibc falls back to clone
        for name in ("kill", "tgkill", "rt_sigqueueinfo", "rt_tgsigqueueinfo"):
            rule(deny, name, (0, _SCMP_CMP_NE, me))
        for name in ("socket", "socketpair"):
            rule(_errno_action(errno.EAFNOSUPPORT), name, (0, _SCMP_CMP_NE, _AF_UNIX))
        for name in _CONNECTING:
            rule(_errno_action(errno.ECONNREFUSED), name)
        if lib.seccomp_attr_set(ctx, _SCMP_FLTATR_CTL_TSYNC, 1):
            raise SandboxError("seccomp cannot synchronise its filter to every thread")
        if rc := lib.seccomp_load(ctx):
            raise SandboxError(f"seccomp_load failed: {os.strerror(-rc)}")
    finally:
        lib.seccomp_release(ctx)


# --- user, capabilities, limits ---------------------------------------------------------
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_CAPBSET_DROP = 4, 38, 24
_CAP_LAST = 63
_CAPABILITY_V3 = 0x20080522


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _world_reachable(path: Path) -> bool:
    """Whether a user who is neither owner nor group can reach `path` (x on every folder above)."""
    path = path.resolve()
    for folder in [*reversed(path.parents)]:
        with contextlib.suppress(OSError):
            if not os.stat(folder).st_mode & stat.S_IXOTH:
                return False
    return True


def _drop_user(policy: Policy) -> str:
    """Leave root; what the process now runs as."""
    if os.geteuid() != 0:
        return f"uid {os.geteuid()}"
    written = [p for p in policy.write if not p.is_relative_to("/proc")]  # its own /proc follows its uid
    if all(_world_reachable(p) for p in (*policy.read, *written) if p.exists()):
        for path in written:  # with what root put there before (the builder's candidate.py)
            for folder, _, files in os.walk(path):
                for name in (folder, *(os.path.join(folder, f) for f in files)):
                    with contextlib.suppress(FileNotFoundError):
                        os.lchown(name, NOBODY, NOBODY)
        os.setgroups([])
        os.setresgid(NOBODY, NOBODY, NOBODY)
        os.setresuid(NOBODY, NOBODY, NOBODY)
        # The uid change made it non-dumpable, which gives its own /proc/self files to root;
        # back to dumpable so they are its own (no core dumps: RLIMIT_CORE is 0; no one may
        # trace it: seccomp and Landlock).
        _libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
        return f"uid {NOBODY}"
    for cap in range(_CAP_LAST + 1):
        if _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 and ctypes.get_errno() != errno.EINVAL:
            raise SandboxError(f"cannot drop capability {cap} from the bounding set")
    header, data = _CapHeader(_CAPABILITY_V3, 0), (_CapData * 2)()
    if _libc.capset(ctypes.byref(header), data) != 0:
        raise SandboxError(f"capset failed: {os.strerror(ctypes.get_errno())}")
    return "uid 0 without capabilities (a path it reads is not reachable by other users)"


def _limits(policy: Policy) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (policy.max_file_bytes, policy.max_file_bytes))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    cap = min(policy.max_open_files, hard) if hard != resource.RLIM_INFINITY else policy.max_open_files
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(soft, cap), cap))


# --- the policy -------------------------------------------------------------------------


class SandboxError(RuntimeError):
    """A wall could not be put up: the process must not run generated code."""


@dataclass(frozen=True)
class Policy:
    """What confined code may touch. Paths not named here do not exist for it."""

    read: tuple[Path, ...]  # read and execute, beneath each
    write: tuple[Path, ...]  # read-write beneath each (its scratch folder)
    devices: tuple[Path, ...] = ()  # device files: read, write, ioctl
    listable: tuple[Path, ...] = ()  # folders whose names (not contents) it may list: Python's import path
    allow_exec: bool = False  # the builder runs compilers; a candidate starts nothing
    environment: dict[str, str] = field(default_factory=dict)  # the whole environment afterwards
    max_file_bytes: int = 4 << 30
    max_open_files: int = 4096


def missing() -> str | None:
    """The feature this machine lacks for the sandbox, or None."""
    if not sys.platform.startswith("linux"):
        return "Linux (Landlock and seccomp)"
    if landlock_abi() < 1:
        return "Landlock (Linux 5.13+, enabled in the kernel's lsm= list)"
    if _libseccomp() is None:
        return "libseccomp.so.2 (apt-get install libseccomp2)"
    return None


def require() -> None:
    """Refuse to run generated code without the sandbox: one line, naming the flag."""
    if lack := missing():
        from htam_graph.errors import ConfigError

        raise ConfigError(
            f"cannot sandbox generated code: this machine lacks {lack}; {NO_SANDBOX_FLAG} accepts the risk", value=lack
        )


def confine(policy: Policy) -> str:
    """Put up every wall around this process, for good; a one-line summary of them."""
    if lack := missing():
        raise SandboxError(f"no sandbox: this machine lacks {lack}")
    abi = landlock_abi()
    _limits(policy)
    ruleset = _landlock_ruleset(policy, abi)  # opens the paths while it is still root
    who = _drop_user(policy)
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SandboxError("prctl(PR_SET_NO_NEW_PRIVS) failed")
    _landlock_restrict(ruleset)
    _seccomp(policy)
    os.environ.clear()
    os.environ.update(policy.environment)
    tempfile.tempdir = policy.environment.get("TMPDIR")  # Python may have cached /tmp already
    return f"{who}, no_new_privs, Landlock ABI {abi}, seccomp{' (exec allowed)' if policy.allow_exec else ''}"


# --- the policies the judge uses ---------------------------------------------------------

_SYSTEM_READ = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/opt", "/proc", "/sys")
_ETC_READ = ("/etc/ld.so.cache", "/etc/localtime", "/etc/nsswitch.conf", "/etc/passwd", "/etc/group")
_BUILD_ETC = ("/etc/alternatives",)
_DEVICES = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom")


def python_paths() -> tuple[Path, ...]:
    """What Python needs to import: its prefixes, the import path and the htam_graph
    package, but never the folder that holds the package or the working folder, nor any
    folder above them (a checkout's root holds .env files; a home folder, settings)."""
    import htam_graph

    root, cwd = package_root(), Path.cwd().resolve()
    found = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)}
    found.add(Path(os.path.realpath(sys.executable)).parent.parent)
    found.update(Path(entry).resolve() for entry in sys.path if entry)
    kept = [p for p in found if not (root.is_relative_to(p) or cwd.is_relative_to(p) or _project(p))]
    return (*sorted(kept), Path(htam_graph.__file__).resolve().parent)


def _project(folder: Path) -> bool:
    """A project's root (an editable install's), which holds its settings and .env files."""
    return any((folder / name).exists() for name in ("pyproject.toml", ".git", ".env"))


def package_root() -> Path:
    """The folder that holds the htam_graph package (a checkout's root, or site-packages)."""
    import htam_graph

    return Path(htam_graph.__file__).resolve().parent.parent


def python_env() -> dict[str, str]:
    """PYTHONPATH for a Python the judge starts, so it imports this very htam_graph."""
    paths = [str(package_root()), *(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p)]
    return {"PYTHONPATH": os.pathsep.join(dict.fromkeys(paths))}


def driver_library_dirs() -> tuple[Path, ...]:
    """Where this host keeps the NVIDIA driver's user-space libraries (libcuda, and the
    libnvidia-* it loads beside it), which need not be under /usr (a GPU operator's
    /run/nvidia/driver, say): found by loading libcuda (cuInit is not called)."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libcuda.so.1")
    found: set[Path] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/maps").read_text().splitlines():
            path = line.split(maxsplit=5)[-1] if "/" in line else ""
            if "libcuda" in path or "libnvidia" in path:
                found.update({Path(path).parent, Path(os.path.realpath(path)).parent})
    return tuple(sorted(found))


def gpu_devices() -> tuple[Path, ...]:
    """The ordinary character devices and NVIDIA's: /dev/nvidia0.., nvidiactl, nvidia-uvm,
    nvidia-uvm-tools, nvidia-modeset and the nvidia-caps folder (MIG)."""
    return (*(Path(p) for p in _DEVICES), *sorted(Path("/dev").glob("nvidia*")))


def _library_path() -> tuple[Path, ...]:
    return tuple(Path(p) for p in os.environ.get("LD_LIBRARY_PATH", "").split(os.pathsep) if p)


def candidate_reads(readable: tuple[Path, ...] = ()) -> tuple[Path, ...]:
    """What a candidate's process reads: the system, the driver's libraries, Python and
    `readable` (the judge's build cache)."""
    system = (*(Path(p) for p in (*_SYSTEM_READ, *_ETC_READ)), *_library_path(), *driver_library_dirs())
    return (*system, *python_paths(), *readable)


def candidate_policy(
    scratch: Path,
    readable: tuple[Path, ...] = (),
    environment: dict[str, str] | None = None,
    reads: tuple[Path, ...] | None = None,
) -> Policy:
    """A candidate's process: reads the system, Python and `readable` (the judge's build
    cache), writes only `scratch` and its own /proc entries, uses the GPU, starts nothing.

    CUDA does not start without writing under the process's own /proc/self (error 304 from
    cudaGetDeviceCount otherwise; found on the H200 by bench/scripts/sandbox_cuda_smoke.py,
    bench/results/sandbox-2026-12-05-h200). The rule is added in the confined process itself,
    so /proc/self names that process and no other: another process's /proc/<pid> (the
    judge's memory, say) stays read-only, and the user drop and seccomp still apply.
    `reads`: candidate_reads(readable), when found already."""
    env = dict(environment or {})
    env.update({"HOME": str(scratch), "TMPDIR": str(scratch), "PWD": str(scratch)})
    return Policy(
        read=reads if reads is not None else candidate_reads(readable),
        write=(scratch, Path("/proc/self")),
        devices=gpu_devices(),
        listable=(package_root(),),
        environment=env,
    )


def builder_policy(
    build_dir: Path, readable: tuple[Path, ...] = (), environment: dict[str, str] | None = None
) -> Policy:
    """The builder of a load_inline candidate: may run compilers, writes only `build_dir`."""
    policy = candidate_policy(build_dir, readable, environment)
    extra = tuple(Path(p) for p in _BUILD_ETC)
    return Policy(
        read=(*policy.read, *extra),
        write=policy.write,
        devices=tuple(Path(p) for p in _DEVICES),
        listable=policy.listable,
        allow_exec=True,
        environment=policy.environment,
    )
