/* Host-code attacks a candidate's compiled code could make: each runs in a shared library's
 * constructor, as a load_inline extension's static initializer or a ctypes-loaded library
 * would, the moment the library is loaded. Built with one -DATTACK_<NAME> at a time (and
 * -DTARGET / -DTARGET_PID / -DTARGET_PORT where it needs one) by tests/runner/test_sandbox.py.
 *
 * `outcome` is 0 when the attack got through, -errno when the kernel refused it; `detail`
 * says what was tried. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <stddef.h>
#include <unistd.h>

int outcome = 1; /* 1: the attack did not run */
char detail[512] = "";

static void result(int rc, const char* what) {
    outcome = rc < 0 ? -errno : 0;
    snprintf(detail, sizeof detail, "%s: %s", what, rc < 0 ? strerror(errno) : "succeeded");
}

#ifdef ATTACK_THREAD
static void* work(void* arg) { return arg; }
#endif

__attribute__((constructor)) static void attack(void) {
#if defined(ATTACK_WRITE)
    /* create or append to a file outside the scratch folder */
    int fd = open(TARGET, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) { (void)!write(fd, "pwned\n", 6); close(fd); }
    result(fd, "write " TARGET);
#elif defined(ATTACK_READ)
    /* read a file the candidate has no business reading (settings, credentials) */
    char buf[64];
    int fd = open(TARGET, O_RDONLY);
    if (fd >= 0) { (void)!read(fd, buf, sizeof buf); close(fd); }
    result(fd, "read " TARGET);
#elif defined(ATTACK_KILL)
    result(kill(TARGET_PID, SIGKILL), "kill -9 the judge");
#elif defined(ATTACK_TGKILL)
    result((int)syscall(SYS_tgkill, TARGET_PID, TARGET_PID, SIGKILL), "tgkill the judge");
#elif defined(ATTACK_PROC_MEM)
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", TARGET_PID);
    int fd = open(path, O_RDWR);
    if (fd >= 0) close(fd);
    result(fd, "open the judge's /proc/<pid>/mem for writing");
#elif defined(ATTACK_PTRACE)
    result((int)ptrace(PTRACE_ATTACH, TARGET_PID, 0, 0), "ptrace-attach the judge");
#elif defined(ATTACK_VM_READ)
    char buf[8];
    struct iovec local = {buf, sizeof buf}, remote = {(void*)0x400000, sizeof buf};
    result((int)process_vm_readv(TARGET_PID, &local, 1, &remote, 1, 0), "process_vm_readv the judge");
#elif defined(ATTACK_EXEC)
    char* argv[] = {"/bin/sh", "-c", "touch /tmp/htam-exec-pwned", NULL};
    result(execv("/bin/sh", argv), "execv /bin/sh");
#elif defined(ATTACK_FORK)
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid(pid, NULL, 0);
    result(pid, "fork");
#elif defined(ATTACK_CLONE)
    long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid((pid_t)pid, NULL, 0);
    result((int)pid, "raw clone of a process");
#elif defined(ATTACK_TCP)
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd >= 0) {
        struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(TARGET_PORT)};
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        int rc = connect(fd, (struct sockaddr*)&addr, sizeof addr);
        close(fd);
        result(rc, "connect to a TCP port");
    } else {
        result(fd, "open a TCP socket");
    }
#elif defined(ATTACK_NETLINK)
    result(socket(AF_NETLINK, SOCK_RAW, 0), "open a netlink socket");
#elif defined(ATTACK_UNIX)
    /* a unix socket of the judge's (or a docker.sock), by path or abstract name (ABSTRACT=1) */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        result(fd, "open a unix socket");
    } else {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        memcpy(addr.sun_path + ABSTRACT, TARGET, sizeof TARGET - 1);
        socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + ABSTRACT + sizeof TARGET - 1);
        int rc = connect(fd, (struct sockaddr*)&addr, size);
        close(fd);
        result(rc, "connect to a unix socket of the judge's");
    }
#elif defined(ATTACK_LISTEN)
    /* serve a unix socket of its own: by path (outside its scratch folder), or by an abstract
     * name a host client might use (ABSTRACT=1); bind and listen are allowed (CUDA's driver
     * needs them), so accepting a connection is what must fail */
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0) {
        result(fd, "open a unix socket");
    } else {
        struct sockaddr_un addr = {.sun_family = AF_UNIX};
        memcpy(addr.sun_path + ABSTRACT, TARGET, sizeof TARGET - 1);
        socklen_t size = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + ABSTRACT + sizeof TARGET - 1);
        int rc = bind(fd, (struct sockaddr*)&addr, size);
        if (rc == 0) rc = listen(fd, 1);
        if (rc == 0) rc = accept4(fd, NULL, NULL, SOCK_NONBLOCK);
        int saved = errno;
        close(fd);
        errno = saved;
        result(rc, "serve a unix socket");
    }
#elif defined(ATTACK_UNSHARE)
    result((int)syscall(SYS_unshare, 0x10000000 /* CLONE_NEWUSER */), "unshare a user namespace");
#elif defined(ATTACK_SETUID)
    result(setuid(0), "setuid(0)");
#elif defined(ATTACK_THREAD)
    /* not an attack: threads must keep working (CUDA and torch start them) */
    pthread_t thread;
    int rc = pthread_create(&thread, NULL, work, NULL);
    if (rc == 0) pthread_join(thread, NULL); else errno = rc;
    result(rc == 0 ? 0 : -1, "start a thread");
#else
#error "define one ATTACK_<NAME>"
#endif
}
