/*
 * A stand-in for libnvidia-ml.so.1 on machines without an NVIDIA GPU.
 *
 * The real nvidia-ml-py bindings load it with ctypes and call it unmodified, so the
 * signatures, struct layouts, versioned entry points and return codes below follow
 * nvml.h and pynvml.py (nvidia-ml-py 13.x) exactly. What the "driver" reports comes from
 * the simulated-GPU state file described in CONTRIBUTING.md: $FAKE_GPU_STATE, else
 * /run/fakegpu/state.json. The file is re-read whenever it changes (writers replace it
 * atomically), so memory moves while a process holds NVML open, as on a real card.
 *
 * Failure modes come from the state's "faults" object:
 *   "<nvml function>": "NVML_ERROR_<NAME>"  that call (or, for an unversioned key such as
 *                                           "nvmlInit", every version of it) returns the error
 *   "gpu_lost": [index, ...]                 every call on those GPUs returns GPU_IS_LOST
 *
 * Build: tests/twin/fakes/build (gcc, no dependencies).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;

enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NO_PERMISSION = 4,
    NVML_ERROR_ALREADY_INITIALIZED = 5,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_INSUFFICIENT_POWER = 8,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_TIMEOUT = 10,
    NVML_ERROR_IRQ_ISSUE = 11,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_CORRUPTED_INFOROM = 14,
    NVML_ERROR_GPU_IS_LOST = 15,
    NVML_ERROR_RESET_REQUIRED = 16,
    NVML_ERROR_OPERATING_SYSTEM = 17,
    NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18,
    NVML_ERROR_IN_USE = 19,
    NVML_ERROR_MEMORY = 20,
    NVML_ERROR_NO_DATA = 21,
    NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23,
    NVML_ERROR_FREQ_NOT_SUPPORTED = 24,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_DEPRECATED = 26,
    NVML_ERROR_NOT_READY = 27,
    NVML_ERROR_GPU_NOT_FOUND = 28,
    NVML_ERROR_INVALID_STATE = 29,
    NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30,
    NVML_ERROR_UNKNOWN = 999,
};

/* nvml.h: buffer sizes the callers are told to use. */
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
#define NVML_VALUE_NOT_AVAILABLE_UINT 0xFFFFFFFFu
#define NVML_VALUE_NOT_AVAILABLE_ULL 0xFFFFFFFFFFFFFFFFull
#define NVML_MEMORY_V2_VERSION 0x02000028u /* sizeof(nvmlMemory_v2_t) | 2 << 24 */
#define MIB 1048576ull

/* nvml.h / pynvml.py structs, field for field. */
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

typedef struct { /* nvmlPciInfo_t as used by nvmlDeviceGetPciInfo_v3 */
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];
} nvmlPciInfo_t;

typedef struct { /* the legacy layout of nvmlDeviceGetPciInfo / _v2 */
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    unsigned int reserved0, reserved1, reserved2, reserved3;
} nvmlPciInfo_v2_t;

typedef struct { /* nvmlProcessInfo_v1_t */
    unsigned int pid;
    unsigned long long usedGpuMemory;
} nvmlProcessInfo_v1_t;

typedef struct { /* nvmlProcessInfo_v2_t == nvmlProcessInfo_t (v3 uses the same layout) */
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t;

/* ------------------------------------------------------------------------------------------ */
/* A small JSON reader: enough for the state file (objects, arrays, strings, numbers, literals). */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype;

typedef struct jnode {
    jtype type;
    double num;
    int boolean;
    char *str;          /* J_STR value */
    char *key;          /* member name when inside an object */
    struct jnode *kids; /* first child (arrays, objects) */
    struct jnode *next; /* next sibling */
} jnode;

typedef struct {
    const char *p, *end;
    char err[160];
} jparser;

static void jfree(jnode *n) {
    while (n) {
        jnode *next = n->next;
        jfree(n->kids);
        free(n->str);
        free(n->key);
        free(n);
        n = next;
    }
}

static void jskip(jparser *ps) {
    while (ps->p < ps->end && isspace((unsigned char)*ps->p)) ps->p++;
}

static jnode *jvalue(jparser *ps, int depth);

static char *jstring(jparser *ps) {
    if (ps->p >= ps->end || *ps->p != '"') {
        snprintf(ps->err, sizeof ps->err, "expected a string");
        return NULL;
    }
    ps->p++;
    size_t cap = 32, len = 0;
    char *out = malloc(cap);
    while (ps->p < ps->end && *ps->p != '"') {
        char c = *ps->p++;
        if (c == '\\') {
            if (ps->p >= ps->end) break;
            char e = *ps->p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': /* the state holds ASCII; keep anything else as '?' */
                if (ps->end - ps->p < 4) { free(out); snprintf(ps->err, sizeof ps->err, "bad \\u escape"); return NULL; }
                {
                    char hex[5] = {ps->p[0], ps->p[1], ps->p[2], ps->p[3], 0};
                    long code = strtol(hex, NULL, 16);
                    c = code < 128 ? (char)code : '?';
                }
                ps->p += 4;
                break;
            default: c = e; break;
            }
        }
        if (len + 2 > cap) out = realloc(out, cap *= 2);
        out[len++] = c;
    }
    if (ps->p >= ps->end) {
        free(out);
        snprintf(ps->err, sizeof ps->err, "unterminated string");
        return NULL;
    }
    ps->p++;
    out[len] = 0;
    return out;
}

static jnode *jnew(jtype t) {
    jnode *n = calloc(1, sizeof *n);
    n->type = t;
    return n;
}

static jnode *jcontainer(jparser *ps, int depth, char close, jtype type) {
    jnode *node = jnew(type), **tail = &node->kids;
    ps->p++;
    jskip(ps);
    if (ps->p < ps->end && *ps->p == close) { ps->p++; return node; }
    for (;;) {
        char *key = NULL;
        jskip(ps);
        if (type == J_OBJ) {
            if (!(key = jstring(ps))) { jfree(node); return NULL; }
            jskip(ps);
            if (ps->p >= ps->end || *ps->p != ':') {
                snprintf(ps->err, sizeof ps->err, "expected ':' after \"%.60s\"", key);
                free(key);
                jfree(node);
                return NULL;
            }
            ps->p++;
        }
        jnode *kid = jvalue(ps, depth + 1);
        if (!kid) { free(key); jfree(node); return NULL; }
        kid->key = key;
        *tail = kid;
        tail = &kid->next;
        jskip(ps);
        if (ps->p < ps->end && *ps->p == ',') { ps->p++; continue; }
        if (ps->p < ps->end && *ps->p == close) { ps->p++; return node; }
        jfree(node);
        snprintf(ps->err, sizeof ps->err, "expected ',' or '%c' at offset %ld", close, (long)(ps->end - ps->p));
        return NULL;
    }
}

static jnode *jvalue(jparser *ps, int depth) {
    jskip(ps);
    if (depth > 32) { snprintf(ps->err, sizeof ps->err, "nested too deeply"); return NULL; }
    if (ps->p >= ps->end) { snprintf(ps->err, sizeof ps->err, "unexpected end of file"); return NULL; }
    char c = *ps->p;
    if (c == '{') return jcontainer(ps, depth, '}', J_OBJ);
    if (c == '[') return jcontainer(ps, depth, ']', J_ARR);
    if (c == '"') {
        char *s = jstring(ps);
        if (!s) return NULL;
        jnode *n = jnew(J_STR);
        n->str = s;
        return n;
    }
    if (!strncmp(ps->p, "true", 4) || !strncmp(ps->p, "false", 5)) {
        jnode *n = jnew(J_BOOL);
        n->boolean = *ps->p == 't';
        ps->p += n->boolean ? 4 : 5;
        return n;
    }
    if (!strncmp(ps->p, "null", 4)) { ps->p += 4; return jnew(J_NULL); }
    if (c == '-' || isdigit((unsigned char)c)) {
        char *stop;
        double v = strtod(ps->p, &stop);
        if (stop == ps->p) { snprintf(ps->err, sizeof ps->err, "bad number"); return NULL; }
        ps->p = stop;
        jnode *n = jnew(J_NUM);
        n->num = v;
        return n;
    }
    snprintf(ps->err, sizeof ps->err, "unexpected character '%c'", c);
    return NULL;
}

static jnode *jget(const jnode *obj, const char *key) {
    if (!obj || obj->type != J_OBJ) return NULL;
    for (jnode *k = obj->kids; k; k = k->next)
        if (!strcmp(k->key, key)) return k;
    return NULL;
}

static const char *jstr(const jnode *obj, const char *key, const char *dflt) {
    jnode *n = jget(obj, key);
    return n && n->type == J_STR ? n->str : dflt;
}

static double jnum(const jnode *obj, const char *key, double dflt) {
    jnode *n = jget(obj, key);
    return n && n->type == J_NUM ? n->num : dflt;
}

/* ------------------------------------------------------------------------------------------ */
/* The simulated driver's state. */

typedef struct {
    unsigned int pid;
    int used_known; /* "used_mib": null -> NVML_VALUE_NOT_AVAILABLE, as on MIG or WDDM */
    unsigned long long used_mib;
    unsigned int gpu_instance_id, compute_instance_id;
    char name[256];
} fake_proc;

#define MAX_GPUS 64

typedef struct {
    unsigned int index;
    char uuid[96], name[96], bus_id[32], serial[32];
    unsigned int pci_device_id, pci_subsystem_id;
    unsigned long long total_mib, reserved_mib, used_mib;
    int mig_mode; /* 0, 1, or -1 = not MIG capable (NOT_SUPPORTED) */
    int lost;
    fake_proc *procs;
    unsigned int nprocs;
} fake_gpu;

/* The handles callers hold: stable addresses, one per index, whatever the state says later. */
struct nvmlDevice_st {
    unsigned int slot;
};
typedef struct nvmlDevice_st *nvmlDevice_t;
static struct nvmlDevice_st handles[MAX_GPUS];

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int init_count;
static jnode *state_root;
static fake_gpu gpus[MAX_GPUS];
static unsigned int gpu_count;
static char driver_version[80] = "580.95.05", nvml_version[80] = "13.580.95.05";
static int cuda_driver_version = 13000;
static struct stat state_stat;
static char state_loaded_from[4096]; /* empty: no usable state yet */

static const char *state_path(void) {
    const char *p = getenv("FAKE_GPU_STATE");
    return p && *p ? p : "/run/fakegpu/state.json";
}

static void free_gpus(void) {
    for (unsigned int i = 0; i < gpu_count; i++) free(gpus[i].procs);
    memset(gpus, 0, sizeof gpus);
    gpu_count = 0;
}

static void copy_str(char *dst, size_t cap, const char *src) {
    snprintf(dst, cap, "%s", src ? src : "");
}

static int parse_state(jnode *root, char *why, size_t whylen) {
    if (!root || root->type != J_OBJ) { snprintf(why, whylen, "top level is not an object"); return -1; }
    jnode *list = jget(root, "gpus");
    if (!list || list->type != J_ARR) { snprintf(why, whylen, "\"gpus\" is missing or not a list"); return -1; }
    free_gpus();
    copy_str(driver_version, sizeof driver_version, jstr(root, "driver_version", "580.95.05"));
    copy_str(nvml_version, sizeof nvml_version, jstr(root, "nvml_version", "13.580.95.05"));
    cuda_driver_version = (int)jnum(root, "cuda_driver_version", 13000);
    unsigned int n = 0;
    for (jnode *g = list->kids; g && n < MAX_GPUS; g = g->next, n++) {
        fake_gpu *gpu = &gpus[n];
        gpu->index = (unsigned int)jnum(g, "index", n);
        copy_str(gpu->uuid, sizeof gpu->uuid, jstr(g, "uuid", ""));
        copy_str(gpu->name, sizeof gpu->name, jstr(g, "name", "NVIDIA Fake GPU"));
        copy_str(gpu->bus_id, sizeof gpu->bus_id, jstr(g, "pci_bus_id", ""));
        copy_str(gpu->serial, sizeof gpu->serial, jstr(g, "serial", ""));
        gpu->pci_device_id = (unsigned int)jnum(g, "pci_device_id", 0);
        gpu->pci_subsystem_id = (unsigned int)jnum(g, "pci_subsystem_id", 0);
        gpu->total_mib = (unsigned long long)jnum(g, "memory_total_mib", 0);
        gpu->reserved_mib = (unsigned long long)jnum(g, "memory_reserved_mib", 0);
        gpu->used_mib = (unsigned long long)jnum(g, "background_used_mib", 0);
        jnode *mig = jget(g, "mig_mode");
        gpu->mig_mode = !mig || mig->type == J_NULL ? -1 : mig->type == J_BOOL ? mig->boolean : (int)mig->num;
        jnode *procs = jget(g, "processes");
        unsigned int np = 0;
        if (procs && procs->type == J_ARR)
            for (jnode *p = procs->kids; p; p = p->next) np++;
        gpu->procs = calloc(np ? np : 1, sizeof *gpu->procs);
        gpu->nprocs = np;
        unsigned int i = 0;
        for (jnode *p = np ? procs->kids : NULL; p; p = p->next, i++) {
            fake_proc *fp = &gpu->procs[i];
            jnode *used = jget(p, "used_mib");
            fp->pid = (unsigned int)jnum(p, "pid", 0);
            fp->used_known = used && used->type == J_NUM;
            fp->used_mib = fp->used_known ? (unsigned long long)used->num : 0;
            fp->gpu_instance_id = (unsigned int)jnum(p, "gpu_instance_id", NVML_VALUE_NOT_AVAILABLE_UINT);
            fp->compute_instance_id = (unsigned int)jnum(p, "compute_instance_id", NVML_VALUE_NOT_AVAILABLE_UINT);
            copy_str(fp->name, sizeof fp->name, jstr(p, "name", ""));
            gpu->used_mib += fp->used_mib;
        }
    }
    gpu_count = n;
    jnode *faults = jget(root, "faults");
    jnode *lost = jget(faults, "gpu_lost");
    if (lost && lost->type == J_ARR)
        for (jnode *l = lost->kids; l; l = l->next)
            for (unsigned int i = 0; i < gpu_count; i++)
                if (l->type == J_NUM && gpus[i].index == (unsigned int)l->num) gpus[i].lost = 1;
    return 0;
}

/* Re-read the state when the file changed. 0 = usable state, else the NVML error to return.
 * No file means no driver. A file that cannot be parsed keeps the last good state of the same
 * path (writers replace it atomically, so that is a hand edit in progress). */
static nvmlReturn_t refresh_state(void) {
    struct stat st;
    const char *path = state_path();
    int same_path = !strcmp(path, state_loaded_from);
    if (stat(path, &st) != 0) {
        state_loaded_from[0] = 0;
        return NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (same_path && st.st_ino == state_stat.st_ino && st.st_size == state_stat.st_size &&
        st.st_mtim.tv_sec == state_stat.st_mtim.tv_sec && st.st_mtim.tv_nsec == state_stat.st_mtim.tv_nsec)
        return NVML_SUCCESS;
    FILE *f = fopen(path, "rb");
    if (!f) return same_path ? NVML_SUCCESS : NVML_ERROR_NO_PERMISSION;
    char *buf = malloc((size_t)st.st_size + 1);
    size_t len = fread(buf, 1, (size_t)st.st_size, f);
    fclose(f);
    buf[len] = 0;
    jparser ps = {buf, buf + len, ""};
    jnode *root = jvalue(&ps, 0);
    char why[200] = "";
    if (root) {
        jskip(&ps);
        if (ps.p != ps.end) snprintf(why, sizeof why, "trailing data after the JSON value");
    } else {
        snprintf(why, sizeof why, "%s", ps.err);
    }
    free(buf);
    if (!why[0] && parse_state(root, why, sizeof why) == 0) {
        jfree(state_root);
        state_root = root;
        state_stat = st;
        copy_str(state_loaded_from, sizeof state_loaded_from, path);
        return NVML_SUCCESS;
    }
    jfree(root);
    /* A driver never prints; this file is test input, so say why it was rejected. */
    fprintf(stderr, "fake libnvidia-ml: cannot use %s: %s\n", path, why);
    return same_path ? NVML_SUCCESS : NVML_ERROR_UNKNOWN;
}

static const struct { const char *name; nvmlReturn_t code; } error_names[] = {
    {"NVML_ERROR_UNINITIALIZED", 1}, {"NVML_ERROR_INVALID_ARGUMENT", 2}, {"NVML_ERROR_NOT_SUPPORTED", 3},
    {"NVML_ERROR_NO_PERMISSION", 4}, {"NVML_ERROR_ALREADY_INITIALIZED", 5}, {"NVML_ERROR_NOT_FOUND", 6},
    {"NVML_ERROR_INSUFFICIENT_SIZE", 7}, {"NVML_ERROR_INSUFFICIENT_POWER", 8},
    {"NVML_ERROR_DRIVER_NOT_LOADED", 9}, {"NVML_ERROR_TIMEOUT", 10}, {"NVML_ERROR_IRQ_ISSUE", 11},
    {"NVML_ERROR_LIBRARY_NOT_FOUND", 12}, {"NVML_ERROR_FUNCTION_NOT_FOUND", 13},
    {"NVML_ERROR_CORRUPTED_INFOROM", 14}, {"NVML_ERROR_GPU_IS_LOST", 15}, {"NVML_ERROR_RESET_REQUIRED", 16},
    {"NVML_ERROR_OPERATING_SYSTEM", 17}, {"NVML_ERROR_LIB_RM_VERSION_MISMATCH", 18}, {"NVML_ERROR_IN_USE", 19},
    {"NVML_ERROR_MEMORY", 20}, {"NVML_ERROR_NO_DATA", 21}, {"NVML_ERROR_VGPU_ECC_NOT_SUPPORTED", 22},
    {"NVML_ERROR_INSUFFICIENT_RESOURCES", 23}, {"NVML_ERROR_FREQ_NOT_SUPPORTED", 24},
    {"NVML_ERROR_ARGUMENT_VERSION_MISMATCH", 25}, {"NVML_ERROR_DEPRECATED", 26}, {"NVML_ERROR_NOT_READY", 27},
    {"NVML_ERROR_GPU_NOT_FOUND", 28}, {"NVML_ERROR_INVALID_STATE", 29},
    {"NVML_ERROR_RESET_TYPE_NOT_SUPPORTED", 30}, {"NVML_ERROR_UNKNOWN", 999},
};

static nvmlReturn_t error_code(const jnode *value) {
    if (value->type == J_NUM) return (nvmlReturn_t)value->num;
    if (value->type == J_STR)
        for (size_t i = 0; i < sizeof error_names / sizeof *error_names; i++)
            if (!strcmp(value->str, error_names[i].name)) return error_names[i].code;
    return NVML_ERROR_UNKNOWN;
}

/* The fault configured for `fn`: its exact name, else its unversioned family
 * ("nvmlInit" covers nvmlInit_v2 and nvmlInitWithFlags). */
static nvmlReturn_t injected_fault(const char *fn) {
    jnode *faults = jget(state_root, "faults");
    if (!faults) return NVML_SUCCESS;
    jnode *exact = jget(faults, fn);
    if (exact) return error_code(exact);
    char family[128];
    copy_str(family, sizeof family, fn);
    char *cut = strstr(family, "WithFlags");
    if (!cut) {
        cut = strrchr(family, '_');
        if (cut && !(cut[1] == 'v' && isdigit((unsigned char)cut[2]))) cut = NULL;
    }
    if (!cut) return NVML_SUCCESS;
    *cut = 0;
    jnode *fam = jget(faults, family);
    return fam ? error_code(fam) : NVML_SUCCESS;
}

/* Entry checks shared by every call: initialised, state readable, no injected fault. */
static nvmlReturn_t enter(const char *fn) {
    pthread_mutex_lock(&lock);
    if (!init_count) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t ret = refresh_state();
    if (ret == NVML_SUCCESS) ret = injected_fault(fn);
    return ret;
}

static nvmlReturn_t leave(nvmlReturn_t ret) {
    pthread_mutex_unlock(&lock);
    return ret;
}

static fake_gpu *gpu_of(nvmlDevice_t dev, nvmlReturn_t *ret) {
    if (!dev || dev < handles || dev >= handles + MAX_GPUS || dev->slot >= gpu_count) {
        *ret = NVML_ERROR_INVALID_ARGUMENT;
        return NULL;
    }
    fake_gpu *gpu = &gpus[dev->slot];
    if (gpu->lost) {
        *ret = NVML_ERROR_GPU_IS_LOST;
        return NULL;
    }
    *ret = NVML_SUCCESS;
    return gpu;
}

static nvmlReturn_t copy_out(char *dst, unsigned int cap, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > cap) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, strlen(src) + 1);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* Initialisation and system queries. */

static nvmlReturn_t do_init(const char *fn) {
    pthread_mutex_lock(&lock);
    nvmlReturn_t ret = refresh_state();
    if (ret == NVML_SUCCESS) ret = injected_fault(fn);
    if (ret == NVML_SUCCESS) init_count++;
    return leave(ret);
}

EXPORT nvmlReturn_t nvmlInit(void) { return do_init("nvmlInit"); }
EXPORT nvmlReturn_t nvmlInit_v2(void) { return do_init("nvmlInit_v2"); }
EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    return do_init("nvmlInitWithFlags");
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
    pthread_mutex_lock(&lock);
    if (!init_count) return leave(NVML_ERROR_UNINITIALIZED);
    init_count--;
    return leave(injected_fault("nvmlShutdown"));
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Argument version mismatch";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    nvmlReturn_t ret = enter("nvmlSystemGetDriverVersion");
    return leave(ret ? ret : copy_out(version, length, driver_version));
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    nvmlReturn_t ret = enter("nvmlSystemGetNVMLVersion");
    return leave(ret ? ret : copy_out(version, length, nvml_version));
}

static nvmlReturn_t cuda_version(const char *fn, int *out) {
    nvmlReturn_t ret = enter(fn);
    if (!ret && !out) ret = NVML_ERROR_INVALID_ARGUMENT;
    if (!ret) *out = cuda_driver_version;
    return leave(ret);
}
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return cuda_version("nvmlSystemGetCudaDriverVersion", v); }
EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return cuda_version("nvmlSystemGetCudaDriverVersion_v2", v); }

/* The real call names the executable of a host PID; the state may name it, else /proc does. */
EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    nvmlReturn_t ret = enter("nvmlSystemGetProcessName");
    if (ret) return leave(ret);
    for (unsigned int g = 0; g < gpu_count; g++)
        for (unsigned int i = 0; i < gpus[g].nprocs; i++)
            if (gpus[g].procs[i].pid == pid && gpus[g].procs[i].name[0])
                return leave(copy_out(name, length, gpus[g].procs[i].name));
    char path[64], exe[256] = "";
    snprintf(path, sizeof path, "/proc/%u/cmdline", pid);
    FILE *f = fopen(path, "rb");
    if (f) {
        size_t n = fread(exe, 1, sizeof exe - 1, f);
        exe[n] = 0;
        fclose(f);
    }
    return leave(exe[0] ? copy_out(name, length, exe) : NVML_ERROR_NOT_FOUND);
}

/* ------------------------------------------------------------------------------------------ */
/* Devices. */

static nvmlReturn_t device_count(const char *fn, unsigned int *count) {
    nvmlReturn_t ret = enter(fn);
    if (!ret && !count) ret = NVML_ERROR_INVALID_ARGUMENT;
    if (!ret) *count = gpu_count;
    return leave(ret);
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *c) { return device_count("nvmlDeviceGetCount", c); }
EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c) { return device_count("nvmlDeviceGetCount_v2", c); }

static nvmlReturn_t handle_by_index(const char *fn, unsigned int index, nvmlDevice_t *device) {
    nvmlReturn_t ret = enter(fn);
    if (ret) return leave(ret);
    if (!device) return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < gpu_count; i++) {
        if (gpus[i].index != index) continue;
        if (gpus[i].lost) return leave(NVML_ERROR_GPU_IS_LOST);
        handles[i].slot = i;
        *device = &handles[i];
        return leave(NVML_SUCCESS);
    }
    return leave(NVML_ERROR_INVALID_ARGUMENT);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *d) {
    return handle_by_index("nvmlDeviceGetHandleByIndex", i, d);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *d) {
    return handle_by_index("nvmlDeviceGetHandleByIndex_v2", i, d);
}

static nvmlReturn_t handle_by_field(const char *fn, const char *wanted, int by_uuid, nvmlDevice_t *device) {
    nvmlReturn_t ret = enter(fn);
    if (ret) return leave(ret);
    if (!wanted || !device) return leave(NVML_ERROR_INVALID_ARGUMENT);
    for (unsigned int i = 0; i < gpu_count; i++) {
        if (strcasecmp(by_uuid ? gpus[i].uuid : gpus[i].bus_id, wanted)) continue;
        if (gpus[i].lost) return leave(NVML_ERROR_GPU_IS_LOST);
        handles[i].slot = i;
        *device = &handles[i];
        return leave(NVML_SUCCESS);
    }
    return leave(NVML_ERROR_NOT_FOUND);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d) {
    return handle_by_field("nvmlDeviceGetHandleByUUID", uuid, 1, d);
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *bus_id, nvmlDevice_t *d) {
    return handle_by_field("nvmlDeviceGetHandleByPciBusId_v2", bus_id, 0, d);
}

#define DEVICE_CALL(fn, dev, gpu)            \
    nvmlReturn_t ret = enter(fn);            \
    fake_gpu *gpu = NULL;                    \
    if (!ret) gpu = gpu_of(dev, &ret);       \
    if (ret) return leave(ret);

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    DEVICE_CALL("nvmlDeviceGetIndex", device, gpu)
    if (!index) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *index = gpu->index;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    DEVICE_CALL("nvmlDeviceGetMinorNumber", device, gpu)
    if (!minor) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *minor = gpu->index;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetName", device, gpu)
    return leave(copy_out(name, length, gpu->name));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetUUID", device, gpu)
    return leave(copy_out(uuid, length, gpu->uuid));
}

EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
    DEVICE_CALL("nvmlDeviceGetSerial", device, gpu)
    if (!gpu->serial[0]) return leave(NVML_ERROR_NOT_SUPPORTED);
    return leave(copy_out(serial, length, gpu->serial));
}

/* "00000000:18:00.0" -> domain, bus, device numbers. */
static void split_bus_id(const char *bus_id, unsigned int *domain, unsigned int *bus, unsigned int *device) {
    *domain = *bus = *device = 0;
    sscanf(bus_id, "%x:%x:%x", domain, bus, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    DEVICE_CALL("nvmlDeviceGetPciInfo_v3", device, gpu)
    if (!pci) return leave(NVML_ERROR_INVALID_ARGUMENT);
    memset(pci, 0, sizeof *pci);
    split_bus_id(gpu->bus_id, &pci->domain, &pci->bus, &pci->device);
    copy_str(pci->busId, sizeof pci->busId, gpu->bus_id);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.0", pci->domain & 0xffff, pci->bus, pci->device);
    pci->pciDeviceId = gpu->pci_device_id;
    pci->pciSubSystemId = gpu->pci_subsystem_id;
    return leave(NVML_SUCCESS);
}

static nvmlReturn_t pci_info_legacy(const char *fn, nvmlDevice_t device, nvmlPciInfo_v2_t *pci) {
    DEVICE_CALL(fn, device, gpu)
    if (!pci) return leave(NVML_ERROR_INVALID_ARGUMENT);
    memset(pci, 0, sizeof *pci);
    split_bus_id(gpu->bus_id, &pci->domain, &pci->bus, &pci->device);
    snprintf(pci->busId, sizeof pci->busId, "%04X:%02X:%02X.0", pci->domain & 0xffff, pci->bus, pci->device);
    pci->pciDeviceId = gpu->pci_device_id;
    pci->pciSubSystemId = gpu->pci_subsystem_id;
    return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t d, nvmlPciInfo_v2_t *p) {
    return pci_info_legacy("nvmlDeviceGetPciInfo", d, p);
}
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_v2_t *p) {
    return pci_info_legacy("nvmlDeviceGetPciInfo_v2", d, p);
}

/* used = background + processes; free = total - reserved - used (CONTRIBUTING.md). */
static unsigned long long free_mib(const fake_gpu *gpu) {
    unsigned long long taken = gpu->reserved_mib + gpu->used_mib;
    return taken >= gpu->total_mib ? 0 : gpu->total_mib - taken;
}

/* v1 predates the reserved field: like the real driver, it counts reserved memory as used. */
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    DEVICE_CALL("nvmlDeviceGetMemoryInfo", device, gpu)
    if (!memory) return leave(NVML_ERROR_INVALID_ARGUMENT);
    memory->total = gpu->total_mib * MIB;
    memory->free = free_mib(gpu) * MIB;
    memory->used = memory->total - memory->free;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    DEVICE_CALL("nvmlDeviceGetMemoryInfo_v2", device, gpu)
    if (!memory) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (memory->version != NVML_MEMORY_V2_VERSION) return leave(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    memory->total = gpu->total_mib * MIB;
    memory->reserved = gpu->reserved_mib * MIB;
    memory->free = free_mib(gpu) * MIB;
    memory->used = memory->total - memory->reserved - memory->free;
    return leave(NVML_SUCCESS);
}

/* The two-call protocol of nvml.h: with too small a buffer (or NULL), say how many entries are
 * needed and return INSUFFICIENT_SIZE; with no processes, count 0 and SUCCESS. */
static nvmlReturn_t running_processes(const char *fn, nvmlDevice_t device, unsigned int *count, void *infos,
                                      int with_instances) {
    DEVICE_CALL(fn, device, gpu)
    if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
    unsigned int capacity = *count;
    *count = gpu->nprocs;
    if (gpu->nprocs == 0) return leave(NVML_SUCCESS);
    if (!infos || capacity < gpu->nprocs) return leave(NVML_ERROR_INSUFFICIENT_SIZE);
    for (unsigned int i = 0; i < gpu->nprocs; i++) {
        const fake_proc *p = &gpu->procs[i];
        unsigned long long used = p->used_known ? p->used_mib * MIB : NVML_VALUE_NOT_AVAILABLE_ULL;
        if (with_instances) {
            nvmlProcessInfo_t *out = (nvmlProcessInfo_t *)infos + i;
            out->pid = p->pid;
            out->usedGpuMemory = used;
            out->gpuInstanceId = p->gpu_instance_id;
            out->computeInstanceId = p->compute_instance_id;
        } else {
            nvmlProcessInfo_v1_t *out = (nvmlProcessInfo_v1_t *)infos + i;
            out->pid = p->pid;
            out->usedGpuMemory = used;
        }
    }
    return leave(NVML_SUCCESS);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_v1_t *i) {
    return running_processes("nvmlDeviceGetComputeRunningProcesses", d, c, i, 0);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *i) {
    return running_processes("nvmlDeviceGetComputeRunningProcesses_v2", d, c, i, 1);
}
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *c, nvmlProcessInfo_t *i) {
    return running_processes("nvmlDeviceGetComputeRunningProcesses_v3", d, c, i, 1);
}

/* Headless inference hosts run no graphics clients. */
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
                                                             nvmlProcessInfo_t *infos) {
    (void)infos;
    DEVICE_CALL("nvmlDeviceGetGraphicsRunningProcesses_v3", device, gpu)
    (void)gpu;
    if (!count) return leave(NVML_ERROR_INVALID_ARGUMENT);
    *count = 0;
    return leave(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    DEVICE_CALL("nvmlDeviceGetMigMode", device, gpu)
    if (!current || !pending) return leave(NVML_ERROR_INVALID_ARGUMENT);
    if (gpu->mig_mode < 0) return leave(NVML_ERROR_NOT_SUPPORTED);
    *current = *pending = (unsigned int)gpu->mig_mode;
    return leave(NVML_SUCCESS);
}
