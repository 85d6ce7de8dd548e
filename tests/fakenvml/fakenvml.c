/*
 * fakenvml.c - a fake libnvidia-ml.so.1 for tests on machines without an NVIDIA GPU.
 *
 * The real pynvml module loads this library instead of the driver's. Every answer comes from a
 * small line-oriented state file named by $FAKE_NVML_STATE (see README.md for the format; the
 * Python writer is tests/fakenvml/state.py). The file is re-read whenever it changes, so a test
 * can alter the "hardware" between two calls.
 *
 * The profile macro FAKENVML_PROFILE (430, 470, 515, 535, 550, 580, or 999 for "next") decides which
 * symbols exist, mirroring
 * the driver branches: callers must cope with functions that are simply missing from older
 * drivers, and symbol presence is the only way pynvml can tell. Everything is built with
 * -fvisibility=hidden, so only functions marked EXPORT end up in the dynamic symbol table.
 *
 * Built against NVIDIA's own nvml.h with NVML_NO_UNVERSIONED_FUNC_DEFS, so that the legacy
 * unversioned entry points (which real drivers still export) can be defined next to the
 * versioned ones, with the header checking every signature.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nvml.h>

#if !defined(FAKENVML_PROFILE) ||                                                                \
    (FAKENVML_PROFILE != 430 && FAKENVML_PROFILE != 470 && FAKENVML_PROFILE != 515 &&               \
     FAKENVML_PROFILE != 535 && FAKENVML_PROFILE != 550 && FAKENVML_PROFILE != 580 && FAKENVML_PROFILE != 999)
#error "define FAKENVML_PROFILE as 430, 470, 515, 535, 550, 580 or 999"
#endif

#define EXPORT __attribute__((visibility("default")))

#if FAKENVML_PROFILE == 430
#define DEFAULT_DRIVER_VERSION "430.26"
#define DEFAULT_NVML_VERSION "10.430.26"
#define DEFAULT_CUDA_VERSION 10020
#elif FAKENVML_PROFILE == 470
#define DEFAULT_DRIVER_VERSION "470.239.06"
#define DEFAULT_NVML_VERSION "11.470.239.06"
#define DEFAULT_CUDA_VERSION 11040
#elif FAKENVML_PROFILE == 515
#define DEFAULT_DRIVER_VERSION "515.105.01"
#define DEFAULT_NVML_VERSION "11.515.105.01"
#define DEFAULT_CUDA_VERSION 11070
#elif FAKENVML_PROFILE == 535
#define DEFAULT_DRIVER_VERSION "535.183.01"
#define DEFAULT_NVML_VERSION "12.535.183.01"
#define DEFAULT_CUDA_VERSION 12020
#elif FAKENVML_PROFILE == 550
#define DEFAULT_DRIVER_VERSION "550.90.07"
#define DEFAULT_NVML_VERSION "12.550.90.07"
#define DEFAULT_CUDA_VERSION 12040
#else
#define DEFAULT_DRIVER_VERSION "580.159.04"
#define DEFAULT_NVML_VERSION "13.580.159.04"
#define DEFAULT_CUDA_VERSION 13000
#endif

#define MAX_GPUS 64
#define STR_MAX 256
#define FN_NAME_MAX 128
#define NO_INSTANCE 0xFFFFFFFFu
#define MAX_MIG 8 /* MIG device slots per GPU: 7 on A100/H100, one spare */

/* ------------------------------------------------------------------------------------------ */
/* Call counters                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* Every NVML entry point this file knows, whether or not the profile exports it, so that
 * fakenvmlCallCount() answers 0 (not garbage) for a function the profile lacks. */
#define FAKENVML_FUNCTIONS(X)                                                                    \
    X(nvmlInit)                                                                                  \
    X(nvmlInit_v2)                                                                               \
    X(nvmlInitWithFlags)                                                                         \
    X(nvmlShutdown)                                                                              \
    X(nvmlErrorString)                                                                           \
    X(nvmlSystemGetDriverVersion)                                                                \
    X(nvmlSystemGetNVMLVersion)                                                                  \
    X(nvmlSystemGetCudaDriverVersion)                                                            \
    X(nvmlSystemGetCudaDriverVersion_v2)                                                         \
    X(nvmlDeviceGetCount)                                                                        \
    X(nvmlDeviceGetCount_v2)                                                                     \
    X(nvmlDeviceGetHandleByIndex)                                                                \
    X(nvmlDeviceGetHandleByIndex_v2)                                                             \
    X(nvmlDeviceGetIndex)                                                                        \
    X(nvmlDeviceGetName)                                                                         \
    X(nvmlDeviceGetUUID)                                                                         \
    X(nvmlDeviceGetMemoryInfo)                                                                   \
    X(nvmlDeviceGetMemoryInfo_v2)                                                                \
    X(nvmlDeviceGetUtilizationRates)                                                             \
    X(nvmlDeviceGetTemperature)                                                                  \
    X(nvmlDeviceGetPowerUsage)                                                                   \
    X(nvmlDeviceGetEnforcedPowerLimit)                                                           \
    X(nvmlDeviceGetFanSpeed)                                                                     \
    X(nvmlDeviceGetPerformanceState)                                                             \
    X(nvmlDeviceGetPersistenceMode)                                                              \
    X(nvmlDeviceGetArchitecture)                                                                 \
    X(nvmlDeviceGetClockInfo)                                                                    \
    X(nvmlDeviceGetMaxClockInfo)                                                                 \
    X(nvmlDeviceGetPcieThroughput)                                                               \
    X(nvmlDeviceGetCurrentClocksThrottleReasons)                                                 \
    X(nvmlDeviceGetCurrentClocksEventReasons)                                                    \
    X(nvmlDeviceGetTotalEccErrors)                                                               \
    X(nvmlDeviceGetTotalEnergyConsumption)                                                       \
    X(nvmlDeviceGetComputeRunningProcesses)                                                      \
    X(nvmlDeviceGetComputeRunningProcesses_v2)                                                   \
    X(nvmlDeviceGetComputeRunningProcesses_v3)                                                   \
    X(nvmlDeviceGetGraphicsRunningProcesses)                                                     \
    X(nvmlDeviceGetGraphicsRunningProcesses_v2)                                                  \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3)                                                  \
    X(nvmlDeviceGetProcessUtilization)                                                           \
    X(nvmlDeviceGetProcessesUtilizationInfo)                                                     \
    X(nvmlGpmQueryDeviceSupport)                                                                 \
    X(nvmlGpmSampleAlloc)                                                                        \
    X(nvmlGpmSampleFree)                                                                         \
    X(nvmlGpmSampleGet)                                                                          \
    X(nvmlGpmMetricsGet)                                                                         \
    X(nvmlDeviceGetTemperatureV)                                                                 \
    X(nvmlDeviceGetEccMode)                                                                      \
    X(nvmlDeviceGetCurrPcieLinkGeneration)                                                       \
    X(nvmlDeviceGetCurrPcieLinkWidth)                                                            \
    X(nvmlDeviceGetMaxPcieLinkGeneration)                                                        \
    X(nvmlDeviceGetMaxPcieLinkWidth)                                                             \
    X(nvmlDeviceGetMigMode)                                                                      \
    X(nvmlDeviceGetMaxMigDeviceCount)                                                            \
    X(nvmlDeviceGetMigDeviceHandleByIndex)                                                       \
    X(nvmlDeviceIsMigDeviceHandle)                                                               \
    X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)                                              \
    X(nvmlDeviceGetGpuInstanceId)                                                                \
    X(nvmlDeviceGetComputeInstanceId)                                                            \
    X(nvmlDeviceGetAttributes)                                                                   \
    X(nvmlDeviceGetAttributes_v2)                                                                \
    X(nvmlGpmMigSampleGet)                                                                       \
    X(nvmlDeviceGetRemappedRows)                                                                 \
    X(nvmlDeviceGetRetiredPages)                                                                 \
    X(nvmlDeviceGetRetiredPages_v2)                                                              \
    X(nvmlDeviceGetRetiredPagesPendingStatus)                                                    \
    X(nvmlDeviceGetPcieReplayCounter)                                                            \
    X(nvmlDeviceGetViolationStatus)                                                              \
    X(nvmlDeviceGetSupportedEventTypes)                                                          \
    X(nvmlEventSetCreate)                                                                        \
    X(nvmlDeviceRegisterEvents)                                                                  \
    X(nvmlEventSetWait)                                                                          \
    X(nvmlEventSetWait_v2)                                                                       \
    X(nvmlEventSetFree)                                                                          \
    X(nvmlDeviceGetPciInfo_v3)

typedef enum {
#define X(name) F_##name,
    FAKENVML_FUNCTIONS(X)
#undef X
        F_COUNT
} fn_id;

static const char *const fn_names[F_COUNT] = {
#define X(name) #name,
    FAKENVML_FUNCTIONS(X)
#undef X
};

static unsigned int call_counts[F_COUNT];

/* ------------------------------------------------------------------------------------------ */
/* Error codes                                                                                */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const char *name;    /* NVML_ERROR_* without the prefix, as written in the state file */
    unsigned int code;   /* numeric, so that codes newer than the installed nvml.h still map */
    const char *message; /* what nvmlErrorString() answers; mirrors the real library's wording */
} error_info_t;

static const error_info_t error_table[] = {
    {"SUCCESS", NVML_SUCCESS, "Success"},
    {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED, "Uninitialized"},
    {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT, "Invalid Argument"},
    {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED, "Not Supported"},
    {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION, "Insufficient Permissions"},
    {"ALREADY_INITIALIZED", NVML_ERROR_ALREADY_INITIALIZED, "Already Initialized"},
    {"NOT_FOUND", NVML_ERROR_NOT_FOUND, "Not Found"},
    {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE, "Insufficient Size"},
    {"INSUFFICIENT_POWER", NVML_ERROR_INSUFFICIENT_POWER, "Insufficient External Power"},
    {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED, "Driver Not Loaded"},
    {"TIMEOUT", NVML_ERROR_TIMEOUT, "Timeout"},
    {"IRQ_ISSUE", NVML_ERROR_IRQ_ISSUE, "Interrupt Request Issue"},
    {"LIBRARY_NOT_FOUND", NVML_ERROR_LIBRARY_NOT_FOUND, "NVML Shared Library Not Found"},
    {"FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND, "Function Not Found"},
    {"CORRUPTED_INFOROM", NVML_ERROR_CORRUPTED_INFOROM, "Corrupted infoROM"},
    {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST, "GPU is lost"},
    {"RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED, "GPU requires restart"},
    {"OPERATING_SYSTEM", NVML_ERROR_OPERATING_SYSTEM, "The operating system has blocked the request."},
    {"LIB_RM_VERSION_MISMATCH", NVML_ERROR_LIB_RM_VERSION_MISMATCH,
     "RM has detected an NVML/RM version mismatch."},
    {"IN_USE", NVML_ERROR_IN_USE, "In use by another client"},
    {"MEMORY", NVML_ERROR_MEMORY, "Insufficient Memory"},
    {"NO_DATA", NVML_ERROR_NO_DATA, "No data"},
    {"VGPU_ECC_NOT_SUPPORTED", NVML_ERROR_VGPU_ECC_NOT_SUPPORTED,
     "The requested vgpu operation is not available on target device, because ECC is enabled"},
    {"INSUFFICIENT_RESOURCES", NVML_ERROR_INSUFFICIENT_RESOURCES, "Insufficient resources"},
    {"FREQ_NOT_SUPPORTED", NVML_ERROR_FREQ_NOT_SUPPORTED, "The requested frequency is not supported"},
    {"ARGUMENT_VERSION_MISMATCH", NVML_ERROR_ARGUMENT_VERSION_MISMATCH, "Argument version mismatch"},
    {"DEPRECATED", 26, "Deprecated"},
    {"NOT_READY", 27, "Not ready"},
    {"GPU_NOT_FOUND", 28, "GPU not found"},
    {"INVALID_STATE", 29, "Invalid state"},
    {"RESET_TYPE_NOT_SUPPORTED", 30, "Reset type not supported"},
    {"UNKNOWN", NVML_ERROR_UNKNOWN, "Unknown Error"},
};

#define ERROR_TABLE_LEN (sizeof(error_table) / sizeof(error_table[0]))

static int error_code_from_name(const char *name, nvmlReturn_t *code)
{
    for (size_t i = 0; i < ERROR_TABLE_LEN; i++) {
        if (strcmp(error_table[i].name, name) == 0) {
            *code = (nvmlReturn_t)error_table[i].code;
            return 1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* State                                                                                      */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    char function[FN_NAME_MAX]; /* an NVML function name, or "*" */
    nvmlReturn_t code;
} injected_error_t;

typedef struct {
    injected_error_t *items;
    size_t count, capacity;
} error_list_t;

typedef struct {
    unsigned int pid;
    unsigned long long used_memory;
    int graphics;
} process_t;

typedef struct {
    unsigned int pid;
    unsigned long long timestamp_us;
    unsigned int sm, mem, enc, dec;
} sample_t;

/* One MIG device (a compute instance in a GPU instance) of a GPU in MIG mode. */
typedef struct {
    unsigned int slot; /* nvmlDeviceGetMigDeviceHandleByIndex's index */
    unsigned int gpu_instance_id, compute_instance_id;
    unsigned int multiprocessor_count;
    unsigned long long memory_total, memory_used;
    double gpm_sm_util, gpm_any_tensor_util;
    char uuid[STR_MAX];
    char name[STR_MAX]; /* "NVIDIA H100 80GB HBM3 MIG 3g.40gb", as nvmlDeviceGetName answers on its handle */
} mig_t;

typedef struct {
    unsigned int slot;
    process_t process;
} mig_process_t;

typedef struct {
    char name[STR_MAX];
    char uuid[STR_MAX];
    unsigned long long memory_total;
    unsigned long long memory_reserved;
    unsigned long long memory_used;
    unsigned int util_gpu;
    unsigned int util_memory;
    unsigned int temperature_c;
    unsigned int power_mw;
    unsigned int power_limit_mw;
    unsigned int fan_percent;
    unsigned int pstate;
    unsigned int persistence_mode;
    unsigned int clock_sm_mhz;
    unsigned int clock_mem_mhz;
    unsigned int clock_sm_max_mhz;
    unsigned int clock_mem_max_mhz;
    unsigned int pcie_tx_kbps;
    unsigned int pcie_rx_kbps;
    unsigned long long clocks_event_reasons;
    unsigned long long ecc_uncorrected_volatile;
    unsigned long long energy_mj; /* nvmlDeviceGetTotalEnergyConsumption: mJ since the driver was loaded */
    unsigned int gpm_supported;
    unsigned int architecture; /* nvmlDeviceArchitecture_t: NVML_DEVICE_ARCH_HOPPER (9) by default */
    double gpm_sm_util;
    double gpm_sm_occupancy;
    double gpm_dram_bw_util;
    unsigned int ecc_mode; /* nvmlEnableState_t: 1 enabled, 0 disabled */
    unsigned int pcie_link_gen;
    unsigned int pcie_link_width;
    unsigned int pcie_link_gen_max;
    unsigned int pcie_link_width_max;
    process_t *processes;
    size_t process_count, process_capacity;
    sample_t *samples;
    size_t sample_count, sample_capacity;
    error_list_t errors;
    unsigned int mig_supported; /* 0: nvmlDeviceGetMigMode answers NOT_SUPPORTED (no MIG on this GPU) */
    unsigned int mig_mode;
    unsigned int mig_pending_mode;
    unsigned int mig_max_devices;
    unsigned int multiprocessor_count;
    double gpm_any_tensor_util;
    /* GPM's FP pipe activity (%) and PCIe/NVLink rates (MiB/s); a negative value: that metric is NOT_SUPPORTED */
    double gpm_fp64_util, gpm_fp32_util, gpm_fp16_util;
    double gpm_pcie_tx_mib, gpm_pcie_rx_mib, gpm_nvlink_tx_mib, gpm_nvlink_rx_mib;
    mig_t *migs;
    size_t mig_count, mig_capacity;
    mig_process_t *mig_processes;
    size_t mig_process_count, mig_process_capacity;
    /* Health. Row remapping (Ampere and later data-centre GPUs) and dynamic page retirement (Kepler to Volta
     * Tesla/Quadro with ECC; HBM GPUs with row remapping answer NOT_SUPPORTED for it) are each answered only where
     * the GPU has them, as real drivers do. */
    unsigned int row_remapping;
    unsigned int remapped_correctable, remapped_uncorrectable, remapped_pending, remapped_failed;
    unsigned int page_retirement;
    unsigned int retired_single_bit, retired_double_bit, retired_pending;
    unsigned int pcie_replays;
    /* nvmlDeviceGetViolationStatus: ns below application clocks per perf policy 0-5 (POWER ... RELIABILITY) */
    unsigned long long violation_power_ns, violation_thermal_ns, violation_sync_boost_ns;
    unsigned long long violation_board_limit_ns, violation_low_utilization_ns, violation_reliability_ns;
    unsigned long long event_types; /* nvmlDeviceGetSupportedEventTypes; 0xff9f on the captured H100 */
    char pci_bus_id[STR_MAX];     /* "DDDDDDDD:BB:DD.0", as nvidia-smi and NVML's busId write it */
    unsigned int pci_device_id;    /* device id << 16 | vendor id */
    unsigned int pci_subsystem_id;
    /* The Xids that happened, oldest first: an event set registered for them gets those after its registration. */
    unsigned int *xids;
    size_t xid_count, xid_capacity;
} gpu_t;

typedef struct {
    gpu_t gpus[MAX_GPUS];
    unsigned int gpu_count;
    char driver_version[STR_MAX];
    char nvml_version[STR_MAX];
    int cuda_version;
    nvmlReturn_t init_error;
    error_list_t errors;
    unsigned int privileged;               /* the caller is root: a MIG GPU's own process list is the aggregate */
    nvmlReturn_t mig_unprivileged_error; /* what that list answers others: SUCCESS (empty) or an error */
} state_t;

typedef enum { T_UINT, T_ULL, T_DOUBLE, T_STR } field_type_t;

typedef struct {
    const char *key;
    field_type_t type;
    size_t offset;
} field_t;

#define GPU_FIELD(name, type) {#name, type, offsetof(gpu_t, name)}

/* Table-driven so that adding a field to FakeGpu is one line here plus one in state.py. */
static const field_t gpu_fields[] = {
    GPU_FIELD(name, T_STR),
    GPU_FIELD(uuid, T_STR),
    GPU_FIELD(memory_total, T_ULL),
    GPU_FIELD(memory_reserved, T_ULL),
    GPU_FIELD(memory_used, T_ULL),
    GPU_FIELD(util_gpu, T_UINT),
    GPU_FIELD(util_memory, T_UINT),
    GPU_FIELD(temperature_c, T_UINT),
    GPU_FIELD(power_mw, T_UINT),
    GPU_FIELD(power_limit_mw, T_UINT),
    GPU_FIELD(fan_percent, T_UINT),
    GPU_FIELD(pstate, T_UINT),
    GPU_FIELD(persistence_mode, T_UINT),
    GPU_FIELD(clock_sm_mhz, T_UINT),
    GPU_FIELD(clock_mem_mhz, T_UINT),
    GPU_FIELD(clock_sm_max_mhz, T_UINT),
    GPU_FIELD(clock_mem_max_mhz, T_UINT),
    GPU_FIELD(pcie_tx_kbps, T_UINT),
    GPU_FIELD(pcie_rx_kbps, T_UINT),
    GPU_FIELD(clocks_event_reasons, T_ULL),
    GPU_FIELD(ecc_uncorrected_volatile, T_ULL),
    GPU_FIELD(energy_mj, T_ULL),
    GPU_FIELD(gpm_supported, T_UINT),
    GPU_FIELD(architecture, T_UINT),
    GPU_FIELD(gpm_sm_util, T_DOUBLE),
    GPU_FIELD(gpm_sm_occupancy, T_DOUBLE),
    GPU_FIELD(gpm_dram_bw_util, T_DOUBLE),
    GPU_FIELD(ecc_mode, T_UINT),
    GPU_FIELD(pcie_link_gen, T_UINT),
    GPU_FIELD(pcie_link_width, T_UINT),
    GPU_FIELD(pcie_link_gen_max, T_UINT),
    GPU_FIELD(pcie_link_width_max, T_UINT),
    GPU_FIELD(mig_supported, T_UINT),
    GPU_FIELD(mig_mode, T_UINT),
    GPU_FIELD(mig_pending_mode, T_UINT),
    GPU_FIELD(mig_max_devices, T_UINT),
    GPU_FIELD(multiprocessor_count, T_UINT),
    GPU_FIELD(gpm_any_tensor_util, T_DOUBLE),
    GPU_FIELD(gpm_fp64_util, T_DOUBLE),
    GPU_FIELD(gpm_fp32_util, T_DOUBLE),
    GPU_FIELD(gpm_fp16_util, T_DOUBLE),
    GPU_FIELD(gpm_pcie_tx_mib, T_DOUBLE),
    GPU_FIELD(gpm_pcie_rx_mib, T_DOUBLE),
    GPU_FIELD(gpm_nvlink_tx_mib, T_DOUBLE),
    GPU_FIELD(gpm_nvlink_rx_mib, T_DOUBLE),
    GPU_FIELD(row_remapping, T_UINT),
    GPU_FIELD(remapped_correctable, T_UINT),
    GPU_FIELD(remapped_uncorrectable, T_UINT),
    GPU_FIELD(remapped_pending, T_UINT),
    GPU_FIELD(remapped_failed, T_UINT),
    GPU_FIELD(page_retirement, T_UINT),
    GPU_FIELD(retired_single_bit, T_UINT),
    GPU_FIELD(retired_double_bit, T_UINT),
    GPU_FIELD(retired_pending, T_UINT),
    GPU_FIELD(pcie_replays, T_UINT),
    GPU_FIELD(violation_power_ns, T_ULL),
    GPU_FIELD(violation_thermal_ns, T_ULL),
    GPU_FIELD(violation_sync_boost_ns, T_ULL),
    GPU_FIELD(violation_board_limit_ns, T_ULL),
    GPU_FIELD(violation_low_utilization_ns, T_ULL),
    GPU_FIELD(violation_reliability_ns, T_ULL),
    GPU_FIELD(event_types, T_ULL),
    GPU_FIELD(pci_bus_id, T_STR),
    GPU_FIELD(pci_device_id, T_UINT),
    GPU_FIELD(pci_subsystem_id, T_UINT),
};

#define GPU_FIELD_COUNT (sizeof(gpu_fields) / sizeof(gpu_fields[0]))

/* What the library serves from. Guarded by g_lock, like everything mutable below. */
static state_t g_state;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned int g_refcount;

/* Identity of the file g_state was parsed from; stat() is compared against it at each call. */
static struct {
    int valid;     /* g_state reflects the current environment (file or "no file") */
    int have_file; /* g_state came from a file rather than the empty default */
    char path[4096];
    dev_t dev;
    ino_t ino;
    off_t size;
    long long mtime_ns;
    long long read_at_ns;
} g_cache;

/* Handles are addresses in this array; the index survives state reloads. */
struct nvmlDevice_st {
    unsigned int index;
};
static struct nvmlDevice_st g_handles[MAX_GPUS];
/* MIG device handles: distinct addresses from the GPUs', one per (GPU, slot). */
static struct nvmlDevice_st g_mig_handles[MAX_GPUS][MAX_MIG];

static void *grow(void *items, size_t *capacity, size_t needed, size_t item_size)
{
    if (needed <= *capacity) {
        return items;
    }
    size_t new_capacity = *capacity ? *capacity * 2 : 8;
    while (new_capacity < needed) {
        new_capacity *= 2;
    }
    void *p = realloc(items, new_capacity * item_size);
    if (p != NULL) {
        *capacity = new_capacity;
    }
    return p;
}

static void gpu_defaults(gpu_t *g)
{
    /* Same defaults as FakeGpu, so a hand-written state file can stay short. */
    memset(g, 0, sizeof(*g));
    snprintf(g->name, sizeof(g->name), "%s", "NVIDIA H100 80GB HBM3");
    snprintf(g->uuid, sizeof(g->uuid), "%s", "GPU-00000000-0000-0000-0000-000000000000");
    g->memory_total = 85899345920ULL;
    g->memory_reserved = 536870912ULL;
    g->temperature_c = 35;
    g->power_mw = 70000;
    g->power_limit_mw = 700000;
    g->persistence_mode = 1;
    g->clock_sm_mhz = 1980;
    g->clock_mem_mhz = 2619;
    g->clock_sm_max_mhz = 1980;
    g->clock_mem_max_mhz = 2619;
    g->gpm_supported = 1;
    g->architecture = NVML_DEVICE_ARCH_HOPPER;
    g->ecc_mode = 1;
    g->pcie_link_gen = 5;
    g->pcie_link_width = 16;
    g->pcie_link_gen_max = 5;
    g->pcie_link_width_max = 16;
    g->mig_supported = 1;
    g->mig_max_devices = 7;
    g->multiprocessor_count = 132;
    g->row_remapping = 1;
    g->event_types = 0xff9fULL;
    g->pci_device_id = 0x233010DEu;    /* the captured H100 80GB HBM3 */
    g->pci_subsystem_id = 0x16C110DEu;
}

static void state_free(state_t *s)
{
    for (unsigned int i = 0; i < s->gpu_count; i++) {
        free(s->gpus[i].processes);
        free(s->gpus[i].samples);
        free(s->gpus[i].errors.items);
        free(s->gpus[i].migs);
        free(s->gpus[i].mig_processes);
        free(s->gpus[i].xids);
    }
    free(s->errors.items);
    memset(s, 0, sizeof(*s));
}

static void state_init_empty(state_t *s)
{
    memset(s, 0, sizeof(*s));
    snprintf(s->driver_version, sizeof(s->driver_version), "%s", DEFAULT_DRIVER_VERSION);
    snprintf(s->nvml_version, sizeof(s->nvml_version), "%s", DEFAULT_NVML_VERSION);
    s->cuda_version = DEFAULT_CUDA_VERSION;
    s->init_error = NVML_SUCCESS;
    s->privileged = 1;
    s->mig_unprivileged_error = NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* State file parser                                                                          */
/* ------------------------------------------------------------------------------------------ */

typedef struct {
    const char *path;
    unsigned int line;
} parse_ctx_t;

static void warn(const parse_ctx_t *ctx, const char *what, const char *detail)
{
    /* A typo in a state file must be visible: otherwise a test silently sees defaults. */
    fprintf(stderr, "fakenvml: %s:%u: %s: '%s'\n", ctx->path, ctx->line, what, detail);
}

static int parse_ull(const char *text, unsigned long long max, unsigned long long *out)
{
    if (!isdigit((unsigned char)text[0])) {
        return 0; /* strtoull would accept "-1" and leading spaces */
    }
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (*end != '\0' || v > max) {
        return 0;
    }
    *out = v;
    return 1;
}

static int parse_uint(const char *text, unsigned int *out)
{
    unsigned long long v;
    if (!parse_ull(text, UINT_MAX, &v)) {
        return 0;
    }
    *out = (unsigned int)v;
    return 1;
}

static int parse_double(const char *text, double *out)
{
    char *end;
    if (*text == '\0') {
        return 0;
    }
    double v = strtod(text, &end);
    if (*end != '\0') {
        return 0;
    }
    *out = v;
    return 1;
}

/* Splits "a b c" in place into at most max_fields space-separated tokens; the last token takes
 * the rest of the line so that free text keeps its spaces. */
static int split_fields(char *text, char **fields, int max_fields)
{
    int n = 0;
    while (n < max_fields && text != NULL) {
        if (n == max_fields - 1) {
            fields[n++] = text;
            break;
        }
        char *space = strchr(text, ' ');
        fields[n++] = text;
        if (space == NULL) {
            break;
        }
        *space = '\0';
        text = space + 1;
    }
    return n;
}

static void parse_error_line(const parse_ctx_t *ctx, char *value, error_list_t *list)
{
    char *f[2];
    if (split_fields(value, f, 2) != 2 || strchr(f[1], ' ') != NULL || strlen(f[0]) >= FN_NAME_MAX) {
        warn(ctx, "bad error line (want: error FUNCTION ERROR_NAME)", value);
        return;
    }
    nvmlReturn_t code;
    if (!error_code_from_name(f[1], &code)) {
        warn(ctx, "unknown error name, using UNKNOWN", f[1]);
        code = NVML_ERROR_UNKNOWN;
    }
    injected_error_t *items = grow(list->items, &list->capacity, list->count + 1, sizeof(*items));
    if (items == NULL) {
        return;
    }
    list->items = items;
    snprintf(items[list->count].function, FN_NAME_MAX, "%s", f[0]);
    items[list->count].code = code;
    list->count++;
}

static void parse_process_line(const parse_ctx_t *ctx, char *value, gpu_t *g)
{
    char *f[3];
    process_t p;
    if (split_fields(value, f, 3) != 3 || !parse_uint(f[0], &p.pid) ||
        !parse_ull(f[1], ULLONG_MAX, &p.used_memory) ||
        (strcmp(f[2], "compute") != 0 && strcmp(f[2], "graphics") != 0)) {
        warn(ctx, "bad process line (want: process PID USED_BYTES compute|graphics)", value);
        return;
    }
    p.graphics = strcmp(f[2], "graphics") == 0;
    process_t *items = grow(g->processes, &g->process_capacity, g->process_count + 1, sizeof(*items));
    if (items == NULL) {
        return;
    }
    g->processes = items;
    items[g->process_count++] = p;
}

static void parse_sample_line(const parse_ctx_t *ctx, char *value, gpu_t *g)
{
    char *f[6];
    sample_t s;
    if (split_fields(value, f, 6) != 6 || !parse_uint(f[0], &s.pid) ||
        !parse_ull(f[1], ULLONG_MAX, &s.timestamp_us) || !parse_uint(f[2], &s.sm) ||
        !parse_uint(f[3], &s.mem) || !parse_uint(f[4], &s.enc) || !parse_uint(f[5], &s.dec)) {
        warn(ctx, "bad sample line (want: sample PID TIMESTAMP_US SM MEM ENC DEC)", value);
        return;
    }
    sample_t *items = grow(g->samples, &g->sample_capacity, g->sample_count + 1, sizeof(*items));
    if (items == NULL) {
        return;
    }
    g->samples = items;
    items[g->sample_count++] = s;
}

static void parse_mig_line(const parse_ctx_t *ctx, char *value, gpu_t *g)
{
    char *f[10];
    mig_t m;
    memset(&m, 0, sizeof(m));
    if (split_fields(value, f, 10) != 10 || !parse_uint(f[0], &m.slot) || m.slot >= MAX_MIG ||
        !parse_uint(f[1], &m.gpu_instance_id) || !parse_uint(f[2], &m.compute_instance_id) ||
        !parse_uint(f[3], &m.multiprocessor_count) || !parse_ull(f[4], ULLONG_MAX, &m.memory_total) ||
        !parse_ull(f[5], ULLONG_MAX, &m.memory_used) || !parse_double(f[6], &m.gpm_sm_util) ||
        !parse_double(f[7], &m.gpm_any_tensor_util) || strlen(f[8]) >= STR_MAX || strlen(f[9]) >= STR_MAX) {
        warn(ctx, "bad mig line (want: mig SLOT GI CI SMS MEMORY_TOTAL MEMORY_USED SM TENSOR UUID NAME)", value);
        return;
    }
    snprintf(m.uuid, sizeof(m.uuid), "%s", f[8]);
    snprintf(m.name, sizeof(m.name), "%s", f[9]);
    mig_t *items = grow(g->migs, &g->mig_capacity, g->mig_count + 1, sizeof(*items));
    if (items == NULL) {
        return;
    }
    g->migs = items;
    items[g->mig_count++] = m;
}

static void parse_mig_process_line(const parse_ctx_t *ctx, char *value, gpu_t *g)
{
    char *f[4];
    mig_process_t p;
    if (split_fields(value, f, 4) != 4 || !parse_uint(f[0], &p.slot) || !parse_uint(f[1], &p.process.pid) ||
        !parse_ull(f[2], ULLONG_MAX, &p.process.used_memory) ||
        (strcmp(f[3], "compute") != 0 && strcmp(f[3], "graphics") != 0)) {
        warn(ctx, "bad mig_process line (want: mig_process SLOT PID USED_BYTES compute|graphics)", value);
        return;
    }
    p.process.graphics = strcmp(f[3], "graphics") == 0;
    mig_process_t *items =
        grow(g->mig_processes, &g->mig_process_capacity, g->mig_process_count + 1, sizeof(*items));
    if (items == NULL) {
        return;
    }
    g->mig_processes = items;
    items[g->mig_process_count++] = p;
}

static void parse_xid_line(const parse_ctx_t *ctx, char *value, gpu_t *g)
{
    unsigned int xid;
    if (!parse_uint(value, &xid)) {
        warn(ctx, "bad xid line", value);
        return;
    }
    unsigned int *items = grow(g->xids, &g->xid_capacity, g->xid_count + 1, sizeof(*items));
    if (items == NULL) {
        return;
    }
    g->xids = items;
    items[g->xid_count++] = xid;
}

static void parse_gpu_field(const parse_ctx_t *ctx, const char *key, const char *value, gpu_t *g)
{
    for (size_t i = 0; i < GPU_FIELD_COUNT; i++) {
        const field_t *f = &gpu_fields[i];
        if (strcmp(f->key, key) != 0) {
            continue;
        }
        void *dst = (char *)g + f->offset;
        int ok = 1;
        switch (f->type) {
        case T_UINT:
            ok = parse_uint(value, dst);
            break;
        case T_ULL:
            ok = parse_ull(value, ULLONG_MAX, dst);
            break;
        case T_DOUBLE:
            ok = parse_double(value, dst);
            break;
        case T_STR:
            ok = strlen(value) < STR_MAX;
            snprintf(dst, STR_MAX, "%s", value);
            break;
        }
        if (!ok) {
            warn(ctx, "bad value", key);
        }
        return;
    }
    warn(ctx, "unknown key", key);
}

static void parse_line(const parse_ctx_t *ctx, char *line, state_t *s, gpu_t **current, int *overflow)
{
    if (line[0] == '\0' || line[0] == '#') {
        return;
    }
    char *space = strchr(line, ' ');
    char *value = "";
    if (space != NULL) {
        *space = '\0';
        value = space + 1;
    }
    const char *key = line;

    if (strcmp(key, "gpu") == 0) {
        if (s->gpu_count == MAX_GPUS) {
            if (!*overflow) {
                warn(ctx, "too many GPUs, ignoring the rest", "gpu");
            }
            *overflow = 1;
            *current = NULL;
            return;
        }
        *current = &s->gpus[s->gpu_count++];
        gpu_defaults(*current);
        /* One bus per GPU, from 0x18 as on the dcgm-exporter sample of tests/export, unless the state names one. */
        snprintf((*current)->pci_bus_id, sizeof((*current)->pci_bus_id), "00000000:%02X:00.0", 0x18 + s->gpu_count - 1);
        return;
    }
    if (*overflow) {
        return;
    }
    gpu_t *g = *current;
    if (strcmp(key, "error") == 0) {
        parse_error_line(ctx, value, g != NULL ? &g->errors : &s->errors);
    } else if (g != NULL && strcmp(key, "process") == 0) {
        parse_process_line(ctx, value, g);
    } else if (g != NULL && strcmp(key, "sample") == 0) {
        parse_sample_line(ctx, value, g);
    } else if (g != NULL && strcmp(key, "mig") == 0) {
        parse_mig_line(ctx, value, g);
    } else if (g != NULL && strcmp(key, "mig_process") == 0) {
        parse_mig_process_line(ctx, value, g);
    } else if (g != NULL && strcmp(key, "xid") == 0) {
        parse_xid_line(ctx, value, g);
    } else if (g != NULL) {
        parse_gpu_field(ctx, key, value, g);
    } else if (strcmp(key, "driver_version") == 0) {
        snprintf(s->driver_version, sizeof(s->driver_version), "%s", value);
    } else if (strcmp(key, "nvml_version") == 0) {
        snprintf(s->nvml_version, sizeof(s->nvml_version), "%s", value);
    } else if (strcmp(key, "cuda_version") == 0) {
        unsigned int v;
        if (parse_uint(value, &v) && v <= INT_MAX) {
            s->cuda_version = (int)v;
        } else {
            warn(ctx, "bad value", key);
        }
    } else if (strcmp(key, "privileged") == 0) {
        if (!parse_uint(value, &s->privileged)) {
            warn(ctx, "bad value", key);
        }
    } else if (strcmp(key, "mig_unprivileged_processes") == 0) {
        if (strcmp(value, "empty") == 0) {
            s->mig_unprivileged_error = NVML_SUCCESS;
        } else if (!error_code_from_name(value, &s->mig_unprivileged_error)) {
            warn(ctx, "unknown error name, using UNKNOWN", value);
            s->mig_unprivileged_error = NVML_ERROR_UNKNOWN;
        }
    } else if (strcmp(key, "init_error") == 0) {
        if (!error_code_from_name(value, &s->init_error)) {
            warn(ctx, "unknown error name, using UNKNOWN", value);
            s->init_error = NVML_ERROR_UNKNOWN;
        }
    } else if (strcmp(key, "fakenvml") == 0) {
        if (strcmp(value, "1") != 0) {
            warn(ctx, "unsupported state format version", value);
        }
    } else {
        warn(ctx, "unknown key", key);
    }
}

/* Returns 0 if the file cannot be read (it vanished between stat and open). */
static int parse_file(const char *path, state_t *s)
{
    FILE *fp = fopen(path, "r");
    if (fp == NULL) {
        return 0;
    }
    state_init_empty(s);
    parse_ctx_t ctx = {path, 0};
    gpu_t *current = NULL;
    int overflow = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, fp)) >= 0) {
        ctx.line++;
        if (len > 0 && line[len - 1] == '\n') {
            line[len - 1] = '\0';
        }
        parse_line(&ctx, line, s, &current, &overflow);
    }
    free(line);
    fclose(fp);
    return 1;
}

static long long now_ns(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* Called with g_lock held at the start of every API call. */
static void refresh_state(void)
{
    const char *path = getenv("FAKE_NVML_STATE");
    struct stat st;
    if (path == NULL || path[0] == '\0' || strlen(path) >= sizeof(g_cache.path) || stat(path, &st) != 0) {
        if (!g_cache.valid || g_cache.have_file) {
            state_free(&g_state);
            state_init_empty(&g_state);
            g_cache.valid = 1;
            g_cache.have_file = 0;
        }
        return;
    }
    long long mtime_ns = (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec;
    long long now = now_ns(CLOCK_REALTIME);
    /* File timestamps tick at kernel-jiffy granularity, and a freed inode number is often reused
     * by the next write, so two quick writes of the same size can look identical. Like git's
     * "racily clean" index, keep re-reading while the mtime is too recent to be trusted. */
    int racy = mtime_ns + 2000000000LL > g_cache.read_at_ns;
    if (g_cache.valid && g_cache.have_file && !racy && strcmp(g_cache.path, path) == 0 &&
        g_cache.dev == st.st_dev && g_cache.ino == st.st_ino && g_cache.size == st.st_size &&
        g_cache.mtime_ns == mtime_ns) {
        return;
    }
    state_t *fresh = malloc(sizeof(*fresh));
    if (fresh == NULL) {
        return;
    }
    if (!parse_file(path, fresh)) {
        free(fresh);
        if (!g_cache.valid) {
            state_init_empty(&g_state); /* unreadable: behave as if there were no state file */
            g_cache.valid = 1;
            g_cache.have_file = 0;
        }
        return; /* otherwise keep serving the last state; the next call looks again */
    }
    state_free(&g_state);
    g_state = *fresh;
    free(fresh);
    g_cache.valid = 1;
    g_cache.have_file = 1;
    snprintf(g_cache.path, sizeof(g_cache.path), "%s", path);
    g_cache.dev = st.st_dev;
    g_cache.ino = st.st_ino;
    g_cache.size = st.st_size;
    g_cache.mtime_ns = mtime_ns;
    g_cache.read_at_ns = now;
}

/* ------------------------------------------------------------------------------------------ */
/* Common checks                                                                              */
/* ------------------------------------------------------------------------------------------ */

/* 2: exact name, 1: the unversioned family name ("nvmlFoo" matches "nvmlFoo_v3"), 0: no match. */
static int error_key_match(const char *key, const char *function)
{
    if (strcmp(key, function) == 0) {
        return 2;
    }
    size_t n = strlen(key);
    if (strncmp(key, function, n) != 0 || function[n] != '_' || function[n + 1] != 'v') {
        return 0;
    }
    const char *digits = function + n + 2;
    if (*digits == '\0') {
        return 0;
    }
    for (; *digits; digits++) {
        if (!isdigit((unsigned char)*digits)) {
            return 0;
        }
    }
    return 1;
}

static nvmlReturn_t lookup_error(const error_list_t *list, const char *function, int allow_star)
{
    /* Most specific wins: exact name (3), family name (2), then "*" (1). */
    int best = 0;
    nvmlReturn_t code = NVML_SUCCESS;
    for (size_t i = 0; i < list->count; i++) {
        const injected_error_t *e = &list->items[i];
        int score = error_key_match(e->function, function);
        if (score > 0) {
            score += 1;
        } else if (allow_star && strcmp(e->function, "*") == 0) {
            score = 1;
        }
        if (score > best) {
            best = score;
            code = e->code;
        }
    }
    return code;
}

#define ENTER(fn)                                                                                \
    pthread_mutex_lock(&g_lock);                                                                 \
    call_counts[F_##fn]++;                                                                       \
    refresh_state()

#define RETURN(expr)                                                                             \
    do {                                                                                         \
        nvmlReturn_t rc_ = (expr);                                                               \
        pthread_mutex_unlock(&g_lock);                                                           \
        return rc_;                                                                              \
    } while (0)

static nvmlReturn_t begin_system(fn_id f)
{
    if (g_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    return lookup_error(&g_state.errors, fn_names[f], 0);
}

static int handle_index(nvmlDevice_t device, unsigned int *index)
{
    uintptr_t base = (uintptr_t)&g_handles[0];
    uintptr_t p = (uintptr_t)device;
    if (device == NULL || p < base || p >= base + sizeof(g_handles) || (p - base) % sizeof(g_handles[0]) != 0) {
        return 0;
    }
    *index = (unsigned int)((p - base) / sizeof(g_handles[0]));
    return 1;
}

/* Per-GPU injected errors for one function: exact name, then family name, then "*". */
static nvmlReturn_t gpu_error(const gpu_t *g, fn_id f)
{
    return lookup_error(&g->errors, fn_names[f], 1);
}

/* A MIG device handle: which GPU and slot it is (either pointer may be NULL). */
static int mig_handle_slot(nvmlDevice_t device, unsigned int *gpu, unsigned int *slot)
{
    uintptr_t base = (uintptr_t)&g_mig_handles[0][0];
    uintptr_t p = (uintptr_t)device;
    if (device == NULL || p < base || p >= base + sizeof(g_mig_handles) || (p - base) % sizeof(g_mig_handles[0][0])) {
        return 0;
    }
    size_t n = (p - base) / sizeof(g_mig_handles[0][0]);
    if (gpu != NULL) {
        *gpu = (unsigned int)(n / MAX_MIG);
    }
    if (slot != NULL) {
        *slot = (unsigned int)(n % MAX_MIG);
    }
    return 1;
}

static mig_t *find_mig(gpu_t *g, unsigned int slot)
{
    for (size_t i = 0; i < g->mig_count; i++) {
        if (g->migs[i].slot == slot) {
            return &g->migs[i];
        }
    }
    return NULL;
}

/* The checks of a call on a MIG device handle: its GPU's injected errors apply, a GPU gone is lost, an instance
 * gone (destroyed, or MIG turned off) leaves a stale handle that real drivers refuse as an invalid argument. */
static nvmlReturn_t begin_mig(fn_id f, nvmlDevice_t device, gpu_t **gpu, mig_t **mig)
{
    if (g_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    unsigned int index, slot;
    if (!mig_handle_slot(device, &index, &slot)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (index >= g_state.gpu_count) {
        return NVML_ERROR_GPU_IS_LOST;
    }
    nvmlReturn_t rc = lookup_error(&g_state.errors, fn_names[f], 0);
    if (rc == NVML_SUCCESS) {
        rc = gpu_error(&g_state.gpus[index], f);
    }
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    gpu_t *g = &g_state.gpus[index];
    mig_t *m = g->mig_mode ? find_mig(g, slot) : NULL;
    if (m == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *gpu = g;
    *mig = m;
    return NVML_SUCCESS;
}

static nvmlReturn_t begin_device(fn_id f, nvmlDevice_t device, gpu_t **out)
{
    if (g_refcount == 0) {
        return NVML_ERROR_UNINITIALIZED;
    }
    unsigned int index;
    if (mig_handle_slot(device, NULL, NULL)) {
        return NVML_ERROR_NOT_SUPPORTED; /* a GPU's query on a MIG device: those it answers check first */
    }
    if (!handle_index(device, &index)) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (index >= g_state.gpu_count) {
        /* The state file dropped this GPU after the handle was handed out: it fell off the bus. */
        return NVML_ERROR_GPU_IS_LOST;
    }
    nvmlReturn_t rc = lookup_error(&g_state.errors, fn_names[f], 0);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    rc = gpu_error(&g_state.gpus[index], f);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    *out = &g_state.gpus[index];
    return NVML_SUCCESS;
}

static nvmlReturn_t copy_string(const char *src, char *dst, unsigned int length)
{
    if (dst == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    size_t n = strlen(src);
    if (n + 1 > length) {
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(dst, src, n + 1);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------------------------ */
/* Test hooks                                                                                 */
/* ------------------------------------------------------------------------------------------ */

EXPORT unsigned int fakenvmlCallCount(const char *functionName)
{
    unsigned int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; functionName != NULL && i < F_COUNT; i++) {
        if (strcmp(fn_names[i], functionName) == 0) {
            n = call_counts[i];
            break;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return n;
}

EXPORT void fakenvmlResetCallCounts(void)
{
    pthread_mutex_lock(&g_lock);
    memset(call_counts, 0, sizeof(call_counts));
    pthread_mutex_unlock(&g_lock);
}

/* ------------------------------------------------------------------------------------------ */
/* Initialisation                                                                             */
/* ------------------------------------------------------------------------------------------ */

static nvmlReturn_t do_init(fn_id f)
{
    if (g_state.init_error != NVML_SUCCESS) {
        return g_state.init_error;
    }
    nvmlReturn_t rc = lookup_error(&g_state.errors, fn_names[f], 0);
    if (rc == NVML_SUCCESS) {
        g_refcount++;
    }
    return rc;
}

EXPORT nvmlReturn_t nvmlInit(void)
{
    ENTER(nvmlInit);
    RETURN(do_init(F_nvmlInit));
}

EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    ENTER(nvmlInit_v2);
    RETURN(do_init(F_nvmlInit_v2));
}

EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    (void)flags; /* NO_GPUS etc. change nothing: an empty state already initialises fine */
    ENTER(nvmlInitWithFlags);
    RETURN(do_init(F_nvmlInitWithFlags));
}

EXPORT nvmlReturn_t nvmlShutdown(void)
{
    ENTER(nvmlShutdown);
    nvmlReturn_t rc = begin_system(F_nvmlShutdown);
    if (rc == NVML_SUCCESS) {
        g_refcount--;
    }
    RETURN(rc);
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    pthread_mutex_lock(&g_lock);
    call_counts[F_nvmlErrorString]++;
    pthread_mutex_unlock(&g_lock);
    for (size_t i = 0; i < ERROR_TABLE_LEN; i++) {
        if (error_table[i].code == (unsigned int)result) {
            return error_table[i].message;
        }
    }
    return "Unknown Error";
}

/* ------------------------------------------------------------------------------------------ */
/* System queries                                                                             */
/* ------------------------------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    ENTER(nvmlSystemGetDriverVersion);
    nvmlReturn_t rc = begin_system(F_nvmlSystemGetDriverVersion);
    RETURN(rc != NVML_SUCCESS ? rc : copy_string(g_state.driver_version, version, length));
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length)
{
    ENTER(nvmlSystemGetNVMLVersion);
    nvmlReturn_t rc = begin_system(F_nvmlSystemGetNVMLVersion);
    RETURN(rc != NVML_SUCCESS ? rc : copy_string(g_state.nvml_version, version, length));
}

static nvmlReturn_t cuda_version(fn_id f, int *out)
{
    nvmlReturn_t rc = begin_system(f);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (out == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *out = g_state.cuda_version;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    ENTER(nvmlSystemGetCudaDriverVersion);
    RETURN(cuda_version(F_nvmlSystemGetCudaDriverVersion, cudaDriverVersion));
}

EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *cudaDriverVersion)
{
    ENTER(nvmlSystemGetCudaDriverVersion_v2);
    RETURN(cuda_version(F_nvmlSystemGetCudaDriverVersion_v2, cudaDriverVersion));
}

static nvmlReturn_t device_count(fn_id f, unsigned int *count)
{
    nvmlReturn_t rc = begin_system(f);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *count = g_state.gpu_count;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    ENTER(nvmlDeviceGetCount);
    RETURN(device_count(F_nvmlDeviceGetCount, deviceCount));
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    ENTER(nvmlDeviceGetCount_v2);
    RETURN(device_count(F_nvmlDeviceGetCount_v2, deviceCount));
}

static nvmlReturn_t handle_by_index(fn_id f, unsigned int index, nvmlDevice_t *device)
{
    nvmlReturn_t rc = begin_system(f);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (device == NULL || index >= g_state.gpu_count) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    rc = gpu_error(&g_state.gpus[index], f);
    /* Real drivers hand out handles to a lost GPU; it is the calls on the handle that fail. */
    if (rc == NVML_ERROR_GPU_IS_LOST && lookup_error(&g_state.gpus[index].errors, fn_names[f], 0) == NVML_SUCCESS) {
        rc = NVML_SUCCESS;
    }
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    g_handles[index].index = index;
    *device = &g_handles[index];
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    ENTER(nvmlDeviceGetHandleByIndex);
    RETURN(handle_by_index(F_nvmlDeviceGetHandleByIndex, index, device));
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    ENTER(nvmlDeviceGetHandleByIndex_v2);
    RETURN(handle_by_index(F_nvmlDeviceGetHandleByIndex_v2, index, device));
}

/* ------------------------------------------------------------------------------------------ */
/* Simple device queries                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* The shape shared by most getters: check, then copy one unsigned int field out. */
static nvmlReturn_t get_uint_field(fn_id f, nvmlDevice_t device, unsigned int *out, size_t offset)
{
    gpu_t *g;
    nvmlReturn_t rc = begin_device(f, device, &g);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (out == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *out = *(const unsigned int *)((const char *)g + offset);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    ENTER(nvmlDeviceGetIndex);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetIndex, device, &g);
    if (rc == NVML_SUCCESS) {
        if (index == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            *index = (unsigned int)(g - g_state.gpus);
        }
    }
    RETURN(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    ENTER(nvmlDeviceGetName);
    gpu_t *g;
    mig_t *m;
    if (mig_handle_slot(device, NULL, NULL)) {
        nvmlReturn_t rc = begin_mig(F_nvmlDeviceGetName, device, &g, &m);
        RETURN(rc != NVML_SUCCESS ? rc : copy_string(m->name, name, length));
    }
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetName, device, &g);
    RETURN(rc != NVML_SUCCESS ? rc : copy_string(g->name, name, length));
}

EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    ENTER(nvmlDeviceGetUUID);
    gpu_t *g;
    mig_t *m;
    if (mig_handle_slot(device, NULL, NULL)) {
        nvmlReturn_t rc = begin_mig(F_nvmlDeviceGetUUID, device, &g, &m);
        RETURN(rc != NVML_SUCCESS ? rc : copy_string(m->uuid, uuid, length));
    }
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetUUID, device, &g);
    RETURN(rc != NVML_SUCCESS ? rc : copy_string(g->uuid, uuid, length));
}

static unsigned long long sub_floor0(unsigned long long a, unsigned long long b)
{
    return a > b ? a - b : 0;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    ENTER(nvmlDeviceGetMemoryInfo);
    gpu_t *g;
    mig_t *m;
    if (mig_handle_slot(device, NULL, NULL)) {
        nvmlReturn_t rc = begin_mig(F_nvmlDeviceGetMemoryInfo, device, &g, &m);
        if (rc == NVML_SUCCESS && memory == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (rc == NVML_SUCCESS) {
            memory->total = m->memory_total;
            memory->used = m->memory_used;
            memory->free = sub_floor0(m->memory_total, m->memory_used);
        }
        RETURN(rc);
    }
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetMemoryInfo, device, &g);
    if (rc == NVML_SUCCESS) {
        if (memory == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            /* The v1 struct has no "reserved": drivers count it as used. */
            memory->total = g->memory_total;
            memory->used = g->memory_used + g->memory_reserved;
            memory->free = sub_floor0(g->memory_total, memory->used);
        }
    }
    RETURN(rc);
}

#if FAKENVML_PROFILE >= 515
EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    ENTER(nvmlDeviceGetMemoryInfo_v2);
    gpu_t *g;
    mig_t *m;
    if (mig_handle_slot(device, NULL, NULL)) {
        nvmlReturn_t rc = begin_mig(F_nvmlDeviceGetMemoryInfo_v2, device, &g, &m);
        if (rc == NVML_SUCCESS && memory == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (rc == NVML_SUCCESS && memory->version != nvmlMemory_v2) {
            rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        } else if (rc == NVML_SUCCESS) {
            memory->total = m->memory_total;
            memory->reserved = 0;
            memory->used = m->memory_used;
            memory->free = sub_floor0(m->memory_total, m->memory_used);
        }
        RETURN(rc);
    }
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetMemoryInfo_v2, device, &g);
    if (rc == NVML_SUCCESS) {
        if (memory == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (memory->version != nvmlMemory_v2) {
            rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        } else {
            memory->total = g->memory_total;
            memory->reserved = g->memory_reserved;
            memory->used = g->memory_used;
            memory->free = sub_floor0(g->memory_total, g->memory_reserved + g->memory_used);
        }
    }
    RETURN(rc);
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization)
{
    ENTER(nvmlDeviceGetUtilizationRates);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetUtilizationRates, device, &g);
    if (rc == NVML_SUCCESS && g->mig_mode) {
        rc = NVML_ERROR_NOT_SUPPORTED; /* no utilization in MIG mode, on the GPU or its instances */
    }
    if (rc == NVML_SUCCESS) {
        if (utilization == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            utilization->gpu = g->util_gpu;
            utilization->memory = g->util_memory;
        }
    }
    RETURN(rc);
}

#if FAKENVML_PROFILE != 999 /* "next": a branch that dropped the deprecated call */
EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t sensorType,
                                             unsigned int *temp)
{
    ENTER(nvmlDeviceGetTemperature);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetTemperature, device, &g);
    if (rc == NVML_SUCCESS) {
        if (temp == NULL || (unsigned int)sensorType >= NVML_TEMPERATURE_COUNT) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (sensorType != NVML_TEMPERATURE_GPU) {
            rc = NVML_ERROR_NOT_SUPPORTED;
        } else {
            *temp = g->temperature_c;
        }
    }
    RETURN(rc);
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    ENTER(nvmlDeviceGetPowerUsage);
    RETURN(get_uint_field(F_nvmlDeviceGetPowerUsage, device, power, offsetof(gpu_t, power_mw)));
}

EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *limit)
{
    ENTER(nvmlDeviceGetEnforcedPowerLimit);
    RETURN(get_uint_field(F_nvmlDeviceGetEnforcedPowerLimit, device, limit, offsetof(gpu_t, power_limit_mw)));
}

EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *speed)
{
    ENTER(nvmlDeviceGetFanSpeed);
    RETURN(get_uint_field(F_nvmlDeviceGetFanSpeed, device, speed, offsetof(gpu_t, fan_percent)));
}

EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *pState)
{
    ENTER(nvmlDeviceGetPerformanceState);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetPerformanceState, device, &g);
    if (rc == NVML_SUCCESS) {
        if (pState == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            *pState = (nvmlPstates_t)g->pstate;
        }
    }
    RETURN(rc);
}

/* Every branch has it; the GPU's driver state is kept loaded between clients only while it is on. */
EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t device, nvmlEnableState_t *mode)
{
    ENTER(nvmlDeviceGetPersistenceMode);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetPersistenceMode, device, &g);
    if (rc == NVML_SUCCESS) {
        if (mode == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            *mode = g->persistence_mode ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        }
    }
    RETURN(rc);
}

#if FAKENVML_PROFILE >= 470 /* came with R450 */
EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *arch)
{
    ENTER(nvmlDeviceGetArchitecture);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetArchitecture, device, &g);
    if (rc == NVML_SUCCESS) {
        if (arch == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            *arch = g->architecture;
        }
    }
    RETURN(rc);
}
#endif

static nvmlReturn_t clock_info(fn_id f, nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock, int max)
{
    gpu_t *g;
    nvmlReturn_t rc = begin_device(f, device, &g);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (clock == NULL || (unsigned int)type >= NVML_CLOCK_COUNT) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    switch (type) {
    case NVML_CLOCK_GRAPHICS: /* one clock domain on datacenter parts: graphics == SM */
    case NVML_CLOCK_SM:
        *clock = max ? g->clock_sm_max_mhz : g->clock_sm_mhz;
        return NVML_SUCCESS;
    case NVML_CLOCK_MEM:
        *clock = max ? g->clock_mem_max_mhz : g->clock_mem_mhz;
        return NVML_SUCCESS;
    default:
        return NVML_ERROR_NOT_SUPPORTED;
    }
}

EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    ENTER(nvmlDeviceGetClockInfo);
    RETURN(clock_info(F_nvmlDeviceGetClockInfo, device, type, clock, 0));
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t type, unsigned int *clock)
{
    ENTER(nvmlDeviceGetMaxClockInfo);
    RETURN(clock_info(F_nvmlDeviceGetMaxClockInfo, device, type, clock, 1));
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t counter,
                                                unsigned int *value)
{
    ENTER(nvmlDeviceGetPcieThroughput);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetPcieThroughput, device, &g);
    if (rc == NVML_SUCCESS) {
        if (value == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (counter == NVML_PCIE_UTIL_TX_BYTES) {
            *value = g->pcie_tx_kbps;
        } else if (counter == NVML_PCIE_UTIL_RX_BYTES) {
            *value = g->pcie_rx_kbps;
        } else {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        }
    }
    RETURN(rc);
}

static nvmlReturn_t clocks_reasons(fn_id f, nvmlDevice_t device, unsigned long long *reasons)
{
    gpu_t *g;
    nvmlReturn_t rc = begin_device(f, device, &g);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (reasons == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *reasons = g->clocks_event_reasons;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device,
                                                              unsigned long long *clocksThrottleReasons)
{
    ENTER(nvmlDeviceGetCurrentClocksThrottleReasons);
    RETURN(clocks_reasons(F_nvmlDeviceGetCurrentClocksThrottleReasons, device, clocksThrottleReasons));
}

#if FAKENVML_PROFILE >= 535
EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *clocksEventReasons)
{
    ENTER(nvmlDeviceGetCurrentClocksEventReasons);
    RETURN(clocks_reasons(F_nvmlDeviceGetCurrentClocksEventReasons, device, clocksEventReasons));
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t errorType,
                                                nvmlEccCounterType_t counterType, unsigned long long *eccCounts)
{
    ENTER(nvmlDeviceGetTotalEccErrors);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetTotalEccErrors, device, &g);
    if (rc == NVML_SUCCESS) {
        if (eccCounts == NULL || (counterType != NVML_VOLATILE_ECC && counterType != NVML_AGGREGATE_ECC)) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (errorType == NVML_MEMORY_ERROR_TYPE_UNCORRECTED) {
            /* One counter serves both: the aggregate count can never be below the volatile one. */
            *eccCounts = g->ecc_uncorrected_volatile;
        } else if (errorType == NVML_MEMORY_ERROR_TYPE_CORRECTED) {
            *eccCounts = 0;
        } else {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        }
    }
    RETURN(rc);
}

/* Every branch has it; like real drivers, only a Volta or newer GPU answers (nvml.h: "For Volta or newer fully
 * supported devices"): an older one is NOT_SUPPORTED. NVML_DEVICE_ARCH_UNKNOWN is "presumably something newer". */
EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *energy)
{
    ENTER(nvmlDeviceGetTotalEnergyConsumption);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetTotalEnergyConsumption, device, &g);
    if (rc == NVML_SUCCESS) {
        if (energy == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (g->architecture < NVML_DEVICE_ARCH_VOLTA) {
            rc = NVML_ERROR_NOT_SUPPORTED;
        } else {
            *energy = g->energy_mj;
        }
    }
    RETURN(rc);
}

/* ------------------------------------------------------------------------------------------ */
/* Running processes                                                                          */
/* ------------------------------------------------------------------------------------------ */

/* One MIG process into the caller's array: the v2/v3 structs name its GPU and compute instance. */
static void put_mig_process(const gpu_t *g, const mig_process_t *p, unsigned int n, nvmlProcessInfo_v1_t *infos_v1,
                            nvmlProcessInfo_v2_t *infos_v2)
{
    if (infos_v1 != NULL) {
        infos_v1[n].pid = p->process.pid;
        infos_v1[n].usedGpuMemory = p->process.used_memory;
        return;
    }
    const mig_t *m = find_mig((gpu_t *)g, p->slot);
    infos_v2[n].pid = p->process.pid;
    infos_v2[n].usedGpuMemory = p->process.used_memory;
    infos_v2[n].gpuInstanceId = m != NULL ? m->gpu_instance_id : NO_INSTANCE;
    infos_v2[n].computeInstanceId = m != NULL ? m->compute_instance_id : NO_INSTANCE;
}

/* A process list on a MIG device handle: that instance's processes, to any caller. */
static nvmlReturn_t mig_running_processes(fn_id f, nvmlDevice_t device, int graphics, unsigned int *count,
                                          nvmlProcessInfo_v1_t *infos_v1, nvmlProcessInfo_v2_t *infos_v2)
{
    gpu_t *g;
    mig_t *m;
    nvmlReturn_t rc = begin_mig(f, device, &g, &m);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned int needed = 0;
    for (size_t i = 0; i < g->mig_process_count; i++) {
        needed += g->mig_processes[i].slot == m->slot && g->mig_processes[i].process.graphics == graphics;
    }
    if (needed == 0) {
        *count = 0;
        return NVML_SUCCESS;
    }
    if ((infos_v1 == NULL && infos_v2 == NULL) || *count < needed) {
        *count = needed;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int n = 0;
    for (size_t i = 0; i < g->mig_process_count; i++) {
        const mig_process_t *p = &g->mig_processes[i];
        if (p->slot == m->slot && p->process.graphics == graphics) {
            put_mig_process(g, p, n++, infos_v1, infos_v2);
        }
    }
    *count = n;
    return NVML_SUCCESS;
}

/* A process list on the parent of a MIG GPU: the aggregate of every instance's processes, but only to a
 * privileged caller; others get an empty list (or the error the state names). */
static nvmlReturn_t mig_aggregate_processes(const gpu_t *g, int graphics, unsigned int *count,
                                            nvmlProcessInfo_v1_t *infos_v1, nvmlProcessInfo_v2_t *infos_v2)
{
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (!g_state.privileged) {
        if (g_state.mig_unprivileged_error != NVML_SUCCESS) {
            return g_state.mig_unprivileged_error;
        }
        *count = 0;
        return NVML_SUCCESS;
    }
    unsigned int needed = 0;
    for (size_t i = 0; i < g->mig_process_count; i++) {
        needed += g->mig_processes[i].process.graphics == graphics;
    }
    if (needed == 0) {
        *count = 0;
        return NVML_SUCCESS;
    }
    if ((infos_v1 == NULL && infos_v2 == NULL) || *count < needed) {
        *count = needed;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int n = 0;
    for (size_t i = 0; i < g->mig_process_count; i++) {
        if (g->mig_processes[i].process.graphics == graphics) {
            put_mig_process(g, &g->mig_processes[i], n++, infos_v1, infos_v2);
        }
    }
    *count = n;
    return NVML_SUCCESS;
}

/* Real semantics: a NULL array or a short count answers the needed count with
 * INSUFFICIENT_SIZE, except that no processes at all is a plain SUCCESS with count 0. */
static nvmlReturn_t running_processes(fn_id f, nvmlDevice_t device, int graphics, unsigned int *count,
                                      nvmlProcessInfo_v1_t *infos_v1, nvmlProcessInfo_v2_t *infos_v2)
{
    gpu_t *g;
    if (mig_handle_slot(device, NULL, NULL)) {
        return mig_running_processes(f, device, graphics, count, infos_v1, infos_v2);
    }
    nvmlReturn_t rc = begin_device(f, device, &g);
    if (rc == NVML_SUCCESS && g->mig_mode) {
        return mig_aggregate_processes(g, graphics, count, infos_v1, infos_v2);
    }
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (count == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned int needed = 0;
    for (size_t i = 0; i < g->process_count; i++) {
        needed += g->processes[i].graphics == graphics;
    }
    if (needed == 0) {
        *count = 0;
        return NVML_SUCCESS;
    }
    if ((infos_v1 == NULL && infos_v2 == NULL) || *count < needed) {
        *count = needed;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned int n = 0;
    for (size_t i = 0; i < g->process_count; i++) {
        const process_t *p = &g->processes[i];
        if (p->graphics != graphics) {
            continue;
        }
        if (infos_v1 != NULL) {
            infos_v1[n].pid = p->pid;
            infos_v1[n].usedGpuMemory = p->used_memory;
        } else {
            infos_v2[n].pid = p->pid;
            infos_v2[n].usedGpuMemory = p->used_memory;
            infos_v2[n].gpuInstanceId = NO_INSTANCE;
            infos_v2[n].computeInstanceId = NO_INSTANCE;
        }
        n++;
    }
    *count = n;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                         nvmlProcessInfo_v1_t *infos)
{
    ENTER(nvmlDeviceGetComputeRunningProcesses);
    RETURN(running_processes(F_nvmlDeviceGetComputeRunningProcesses, device, 0, infoCount, infos, NULL));
}

#if FAKENVML_PROFILE >= 470 /* the v2 struct (MIG ids) came with R450 */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                            nvmlProcessInfo_v2_t *infos)
{
    ENTER(nvmlDeviceGetComputeRunningProcesses_v2);
    RETURN(running_processes(F_nvmlDeviceGetComputeRunningProcesses_v2, device, 0, infoCount, NULL, infos));
}
#endif

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses(nvmlDevice_t device, unsigned int *infoCount,
                                                          nvmlProcessInfo_v1_t *infos)
{
    ENTER(nvmlDeviceGetGraphicsRunningProcesses);
    RETURN(running_processes(F_nvmlDeviceGetGraphicsRunningProcesses, device, 1, infoCount, infos, NULL));
}

#if FAKENVML_PROFILE >= 470
EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v2(nvmlDevice_t device, unsigned int *infoCount,
                                                             nvmlProcessInfo_v2_t *infos)
{
    ENTER(nvmlDeviceGetGraphicsRunningProcesses_v2);
    RETURN(running_processes(F_nvmlDeviceGetGraphicsRunningProcesses_v2, device, 1, infoCount, NULL, infos));
}
#endif

#if FAKENVML_PROFILE >= 515
/* The v3 ABI is the v2 struct (nvmlProcessInfo_t); only the symbol name differs. */
EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                            nvmlProcessInfo_t *infos)
{
    ENTER(nvmlDeviceGetComputeRunningProcesses_v3);
    RETURN(running_processes(F_nvmlDeviceGetComputeRunningProcesses_v3, device, 0, infoCount, NULL, infos));
}

EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t device, unsigned int *infoCount,
                                                             nvmlProcessInfo_t *infos)
{
    ENTER(nvmlDeviceGetGraphicsRunningProcesses_v3);
    RETURN(running_processes(F_nvmlDeviceGetGraphicsRunningProcesses_v3, device, 1, infoCount, NULL, infos));
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* Per-process utilization                                                                    */
/* ------------------------------------------------------------------------------------------ */

static unsigned int count_newer_samples(const gpu_t *g, unsigned long long last_seen)
{
    unsigned int n = 0;
    for (size_t i = 0; i < g->sample_count; i++) {
        n += g->samples[i].timestamp_us > last_seen;
    }
    return n;
}

EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *utilization,
                                                    unsigned int *processSamplesCount,
                                                    unsigned long long lastSeenTimeStamp)
{
    ENTER(nvmlDeviceGetProcessUtilization);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetProcessUtilization, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (g->mig_mode) {
        RETURN(NVML_ERROR_NOT_SUPPORTED);
    }
    if (processSamplesCount == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    unsigned int needed = count_newer_samples(g, lastSeenTimeStamp);
    if (needed == 0) {
        RETURN(NVML_ERROR_NOT_FOUND);
    }
    if (utilization == NULL || *processSamplesCount < needed) {
        *processSamplesCount = needed;
        RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    unsigned int n = 0;
    for (size_t i = 0; i < g->sample_count; i++) {
        const sample_t *s = &g->samples[i];
        if (s->timestamp_us <= lastSeenTimeStamp) {
            continue;
        }
        utilization[n].pid = s->pid;
        utilization[n].timeStamp = s->timestamp_us;
        utilization[n].smUtil = s->sm;
        utilization[n].memUtil = s->mem;
        utilization[n].encUtil = s->enc;
        utilization[n].decUtil = s->dec;
        n++;
    }
    *processSamplesCount = n;
    RETURN(NVML_SUCCESS);
}

#if FAKENVML_PROFILE >= 550
EXPORT nvmlReturn_t nvmlDeviceGetProcessesUtilizationInfo(nvmlDevice_t device,
                                                          nvmlProcessesUtilizationInfo_t *procesesUtilInfo)
{
    ENTER(nvmlDeviceGetProcessesUtilizationInfo);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetProcessesUtilizationInfo, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (g->mig_mode) {
        RETURN(NVML_ERROR_NOT_SUPPORTED);
    }
    nvmlProcessesUtilizationInfo_v1_t *info = procesesUtilInfo;
    if (info == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    if (info->version != nvmlProcessesUtilizationInfo_v1) {
        RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    unsigned int needed = count_newer_samples(g, info->lastSeenTimeStamp);
    if (needed == 0) {
        RETURN(NVML_ERROR_NOT_FOUND);
    }
    if (info->procUtilArray == NULL || info->processSamplesCount < needed) {
        info->processSamplesCount = needed;
        RETURN(NVML_ERROR_INSUFFICIENT_SIZE);
    }
    unsigned int n = 0;
    for (size_t i = 0; i < g->sample_count; i++) {
        const sample_t *s = &g->samples[i];
        if (s->timestamp_us <= info->lastSeenTimeStamp) {
            continue;
        }
        nvmlProcessUtilizationInfo_v1_t *out = &info->procUtilArray[n++];
        memset(out, 0, sizeof(*out));
        out->pid = s->pid;
        out->timeStamp = s->timestamp_us;
        out->smUtil = s->sm;
        out->memUtil = s->mem;
        out->encUtil = s->enc;
        out->decUtil = s->dec;
    }
    info->processSamplesCount = n;
    RETURN(NVML_SUCCESS);
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* GPM (GPU performance monitoring, Hopper+)                                                  */
/* ------------------------------------------------------------------------------------------ */

#if FAKENVML_PROFILE >= 535
#define GPM_SAMPLE_MAGIC 0x464b474du

struct nvmlGpmSample_st {
    unsigned int magic; /* catches freed or foreign pointers before they are trusted */
    int taken;          /* nvmlGpmSampleGet has filled it */
    unsigned int device_index;
    long long timestamp_ns;
    double sm_util;
    double sm_occupancy;
    double dram_bw_util;
    unsigned int gpu_instance_id; /* NO_INSTANCE for a whole GPU's sample (nvmlGpmSampleGet) */
    double any_tensor_util;
    double fp64_util, fp32_util, fp16_util;
    double pcie_tx_mib, pcie_rx_mib, nvlink_tx_mib, nvlink_rx_mib;
};

static int gpm_sample_ok(const struct nvmlGpmSample_st *s)
{
    return s != NULL && s->magic == GPM_SAMPLE_MAGIC;
}

EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport)
{
    ENTER(nvmlGpmQueryDeviceSupport);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlGpmQueryDeviceSupport, device, &g);
    if (rc == NVML_SUCCESS) {
        if (gpmSupport == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (gpmSupport->version != NVML_GPM_SUPPORT_VERSION) {
            rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        } else {
            gpmSupport->isSupportedDevice = g->gpm_supported != 0;
        }
    }
    RETURN(rc);
}

EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
    ENTER(nvmlGpmSampleAlloc);
    nvmlReturn_t rc = begin_system(F_nvmlGpmSampleAlloc);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (gpmSample == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    struct nvmlGpmSample_st *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        RETURN(NVML_ERROR_MEMORY);
    }
    s->magic = GPM_SAMPLE_MAGIC;
    *gpmSample = s;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
    ENTER(nvmlGpmSampleFree);
    nvmlReturn_t rc = begin_system(F_nvmlGpmSampleFree);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (!gpm_sample_ok(gpmSample)) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    gpmSample->magic = 0;
    free(gpmSample);
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
    ENTER(nvmlGpmSampleGet);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlGpmSampleGet, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (!gpm_sample_ok(gpmSample)) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    if (!g->gpm_supported) {
        RETURN(NVML_ERROR_NOT_SUPPORTED);
    }
    gpmSample->taken = 1;
    gpmSample->device_index = (unsigned int)(g - g_state.gpus);
    gpmSample->timestamp_ns = now_ns(CLOCK_MONOTONIC);
    gpmSample->sm_util = g->gpm_sm_util;
    gpmSample->sm_occupancy = g->gpm_sm_occupancy;
    gpmSample->dram_bw_util = g->gpm_dram_bw_util;
    gpmSample->gpu_instance_id = NO_INSTANCE;
    gpmSample->any_tensor_util = g->gpm_any_tensor_util;
    gpmSample->fp64_util = g->gpm_fp64_util;
    gpmSample->fp32_util = g->gpm_fp32_util;
    gpmSample->fp16_util = g->gpm_fp16_util;
    gpmSample->pcie_tx_mib = g->gpm_pcie_tx_mib;
    gpmSample->pcie_rx_mib = g->gpm_pcie_rx_mib;
    gpmSample->nvlink_tx_mib = g->gpm_nvlink_tx_mib;
    gpmSample->nvlink_rx_mib = g->gpm_nvlink_rx_mib;
    RETURN(NVML_SUCCESS);
}

/* One metric the fake models only where its state value is not negative (a GPU without NVLink, say). */
static void gpm_answer(nvmlGpmMetric_t *m, double value, const char *shortName, const char *longName, const char *unit)
{
    if (value < 0) {
        m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        m->value = 0.0;
        m->metricInfo.shortName = NULL;
        m->metricInfo.longName = NULL;
        m->metricInfo.unit = NULL;
        return;
    }
    m->value = value;
    m->metricInfo.shortName = (char *)shortName;
    m->metricInfo.longName = (char *)longName;
    m->metricInfo.unit = (char *)unit;
}

EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet)
{
    ENTER(nvmlGpmMetricsGet);
    nvmlReturn_t rc = begin_system(F_nvmlGpmMetricsGet);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (metricsGet == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    if (metricsGet->version != NVML_GPM_METRICS_GET_VERSION) {
        RETURN(NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    }
    const struct nvmlGpmSample_st *s1 = metricsGet->sample1, *s2 = metricsGet->sample2;
    if (!gpm_sample_ok(s1) || !gpm_sample_ok(s2) || !s1->taken || !s2->taken ||
        s1->device_index != s2->device_index || s1->gpu_instance_id != s2->gpu_instance_id ||
        metricsGet->numMetrics > NVML_GPM_METRIC_MAX) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    /* The samples belong to a GPU, so that GPU's injected errors (a lost GPU) apply here too. */
    if (s2->device_index >= g_state.gpu_count) {
        RETURN(NVML_ERROR_GPU_IS_LOST);
    }
    rc = gpu_error(&g_state.gpus[s2->device_index], F_nvmlGpmMetricsGet);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    for (unsigned int i = 0; i < metricsGet->numMetrics; i++) {
        nvmlGpmMetric_t *m = &metricsGet->metrics[i];
        m->nvmlReturn = NVML_SUCCESS;
        switch (m->metricId) {
        case NVML_GPM_METRIC_SM_UTIL:
            m->value = s2->sm_util;
            m->metricInfo.shortName = "sm_util";
            m->metricInfo.longName = "SM utilization";
            m->metricInfo.unit = "%";
            break;
        case NVML_GPM_METRIC_SM_OCCUPANCY:
            m->value = s2->sm_occupancy;
            m->metricInfo.shortName = "sm_occupancy";
            m->metricInfo.longName = "SM occupancy";
            m->metricInfo.unit = "%";
            break;
        case NVML_GPM_METRIC_ANY_TENSOR_UTIL:
            m->value = s2->any_tensor_util;
            m->metricInfo.shortName = "any_tensor_util";
            m->metricInfo.longName = "Any tensor utilization";
            m->metricInfo.unit = "%";
            break;
        case NVML_GPM_METRIC_DRAM_BW_UTIL:
            m->value = s2->dram_bw_util;
            m->metricInfo.shortName = "dram_bw_util";
            m->metricInfo.longName = "DRAM bandwidth utilization";
            m->metricInfo.unit = "%";
            break;
        case NVML_GPM_METRIC_FP64_UTIL:
            gpm_answer(m, s2->fp64_util, "fp64_util", "FP64 utilization", "%");
            break;
        case NVML_GPM_METRIC_FP32_UTIL:
            gpm_answer(m, s2->fp32_util, "fp32_util", "FP32 utilization", "%");
            break;
        case NVML_GPM_METRIC_FP16_UTIL:
            gpm_answer(m, s2->fp16_util, "fp16_util", "FP16 utilization", "%");
            break;
        case NVML_GPM_METRIC_PCIE_TX_PER_SEC:
            gpm_answer(m, s2->pcie_tx_mib, "pcie_tx_per_sec", "PCIe TX", "MiB/sec");
            break;
        case NVML_GPM_METRIC_PCIE_RX_PER_SEC:
            gpm_answer(m, s2->pcie_rx_mib, "pcie_rx_per_sec", "PCIe RX", "MiB/sec");
            break;
        case NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC:
            gpm_answer(m, s2->nvlink_tx_mib, "nvlink_total_tx_per_sec", "NVLink total TX", "MiB/sec");
            break;
        case NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC:
            gpm_answer(m, s2->nvlink_rx_mib, "nvlink_total_rx_per_sec", "NVLink total RX", "MiB/sec");
            break;
        default:
            m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
            m->value = 0.0;
            m->metricInfo.shortName = NULL;
            m->metricInfo.longName = NULL;
            m->metricInfo.unit = NULL;
            break;
        }
    }
    RETURN(NVML_SUCCESS);
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* ECC mode, PCIe link, versioned temperature                                                 */
/* ------------------------------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *current, nvmlEnableState_t *pending)
{
    ENTER(nvmlDeviceGetEccMode);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetEccMode, device, &g);
    if (rc == NVML_SUCCESS) {
        if (current == NULL || pending == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            *current = *pending = g->ecc_mode ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
        }
    }
    RETURN(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t device, unsigned int *currLinkGen)
{
    ENTER(nvmlDeviceGetCurrPcieLinkGeneration);
    RETURN(get_uint_field(F_nvmlDeviceGetCurrPcieLinkGeneration, device, currLinkGen, offsetof(gpu_t, pcie_link_gen)));
}

EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t device, unsigned int *currLinkWidth)
{
    ENTER(nvmlDeviceGetCurrPcieLinkWidth);
    RETURN(get_uint_field(F_nvmlDeviceGetCurrPcieLinkWidth, device, currLinkWidth, offsetof(gpu_t, pcie_link_width)));
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkGeneration(nvmlDevice_t device, unsigned int *maxLinkGen)
{
    ENTER(nvmlDeviceGetMaxPcieLinkGeneration);
    RETURN(get_uint_field(F_nvmlDeviceGetMaxPcieLinkGeneration, device, maxLinkGen, offsetof(gpu_t, pcie_link_gen_max)));
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxPcieLinkWidth(nvmlDevice_t device, unsigned int *maxLinkWidth)
{
    ENTER(nvmlDeviceGetMaxPcieLinkWidth);
    RETURN(get_uint_field(F_nvmlDeviceGetMaxPcieLinkWidth, device, maxLinkWidth, offsetof(gpu_t, pcie_link_width_max)));
}

#if FAKENVML_PROFILE >= 580
/* The versioned form that replaces the deprecated nvmlDeviceGetTemperature; the real R580 exports both. */
EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *temperature)
{
    ENTER(nvmlDeviceGetTemperatureV);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetTemperatureV, device, &g);
    if (rc == NVML_SUCCESS) {
        if (temperature == NULL || (unsigned int)temperature->sensorType >= NVML_TEMPERATURE_COUNT) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (temperature->version != nvmlTemperature_v1) {
            rc = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
        } else if (temperature->sensorType != NVML_TEMPERATURE_GPU) {
            rc = NVML_ERROR_NOT_SUPPORTED;
        } else {
            temperature->temperature = (int)g->temperature_c;
        }
    }
    RETURN(rc);
}
#endif

#if FAKENVML_PROFILE >= 450 /* MIG came with R450 */

/* ------------------------------------------------------------------------------------------ */
/* MIG (multi-instance GPU, Ampere+)                                                          */
/* ------------------------------------------------------------------------------------------ */

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *currentMode, unsigned int *pendingMode)
{
    ENTER(nvmlDeviceGetMigMode);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetMigMode, device, &g);
    if (rc == NVML_SUCCESS) {
        if (currentMode == NULL || pendingMode == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (!g->mig_supported) {
            rc = NVML_ERROR_NOT_SUPPORTED;
        } else {
            *currentMode = g->mig_mode ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
            *pendingMode = g->mig_pending_mode ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
        }
    }
    RETURN(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count)
{
    ENTER(nvmlDeviceGetMaxMigDeviceCount);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetMaxMigDeviceCount, device, &g);
    if (rc == NVML_SUCCESS) {
        if (count == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else if (!g->mig_supported) {
            rc = NVML_ERROR_NOT_SUPPORTED;
        } else {
            *count = g->mig_max_devices < MAX_MIG ? g->mig_max_devices : MAX_MIG;
        }
    }
    RETURN(rc);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                        nvmlDevice_t *migDevice)
{
    ENTER(nvmlDeviceGetMigDeviceHandleByIndex);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetMigDeviceHandleByIndex, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (migDevice == NULL || index >= MAX_MIG || index >= g->mig_max_devices) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    if (!g->mig_supported) {
        RETURN(NVML_ERROR_NOT_SUPPORTED);
    }
    if (!g->mig_mode || find_mig(g, index) == NULL) {
        RETURN(NVML_ERROR_NOT_FOUND); /* an empty slot */
    }
    unsigned int gpu_index = (unsigned int)(g - g_state.gpus);
    g_mig_handles[gpu_index][index].index = gpu_index;
    *migDevice = &g_mig_handles[gpu_index][index];
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *isMigDevice)
{
    ENTER(nvmlDeviceIsMigDeviceHandle);
    if (g_refcount == 0) {
        RETURN(NVML_ERROR_UNINITIALIZED);
    }
    unsigned int index;
    if (isMigDevice == NULL || (!mig_handle_slot(device, NULL, NULL) && !handle_index(device, &index))) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    *isMigDevice = (unsigned int)mig_handle_slot(device, NULL, NULL);
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t migDevice, nvmlDevice_t *device)
{
    ENTER(nvmlDeviceGetDeviceHandleFromMigDeviceHandle);
    gpu_t *g;
    mig_t *m;
    nvmlReturn_t rc = begin_mig(F_nvmlDeviceGetDeviceHandleFromMigDeviceHandle, migDevice, &g, &m);
    if (rc == NVML_SUCCESS) {
        if (device == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            unsigned int index = (unsigned int)(g - g_state.gpus);
            g_handles[index].index = index;
            *device = &g_handles[index];
        }
    }
    RETURN(rc);
}

static nvmlReturn_t instance_id(fn_id f, nvmlDevice_t device, unsigned int *id, int compute)
{
    gpu_t *g;
    mig_t *m;
    if (!mig_handle_slot(device, NULL, NULL)) {
        nvmlReturn_t rc = begin_device(f, device, &g);
        return rc != NVML_SUCCESS ? rc : NVML_ERROR_NOT_SUPPORTED; /* a GPU handle is no instance */
    }
    nvmlReturn_t rc = begin_mig(f, device, &g, &m);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (id == NULL) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    *id = compute ? m->compute_instance_id : m->gpu_instance_id;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id)
{
    ENTER(nvmlDeviceGetGpuInstanceId);
    RETURN(instance_id(F_nvmlDeviceGetGpuInstanceId, device, id, 0));
}

EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id)
{
    ENTER(nvmlDeviceGetComputeInstanceId);
    RETURN(instance_id(F_nvmlDeviceGetComputeInstanceId, device, id, 1));
}

/* "3g.40gb" in "NVIDIA H100 80GB HBM3 MIG 3g.40gb": the slices are the number before the first 'g'. */
static unsigned int profile_slices(const char *name)
{
    const char *mig = strstr(name, "MIG ");
    unsigned int slices = 0;
    if (mig != NULL) {
        for (const char *c = mig + 4; isdigit((unsigned char)*c); c++) {
            slices = slices * 10 + (unsigned int)(*c - '0');
        }
    }
    return slices;
}

static nvmlReturn_t attributes(fn_id f, nvmlDevice_t device, nvmlDeviceAttributes_t *attributes)
{
    gpu_t *g;
    mig_t *m;
    nvmlReturn_t rc;
    if (mig_handle_slot(device, NULL, NULL)) {
        rc = begin_mig(f, device, &g, &m);
        if (rc == NVML_SUCCESS && attributes != NULL) {
            memset(attributes, 0, sizeof(*attributes));
            attributes->multiprocessorCount = m->multiprocessor_count;
            attributes->gpuInstanceSliceCount = profile_slices(m->name);
            attributes->computeInstanceSliceCount = profile_slices(m->name);
            attributes->memorySizeMB = m->memory_total >> 20;
        }
    } else {
        rc = begin_device(f, device, &g);
        if (rc == NVML_SUCCESS && attributes != NULL) {
            memset(attributes, 0, sizeof(*attributes));
            attributes->multiprocessorCount = g->multiprocessor_count;
            attributes->memorySizeMB = g->memory_total >> 20;
        }
    }
    return rc == NVML_SUCCESS && attributes == NULL ? NVML_ERROR_INVALID_ARGUMENT : rc;
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes_)
{
    ENTER(nvmlDeviceGetAttributes_v2);
    RETURN(attributes(F_nvmlDeviceGetAttributes_v2, device, attributes_));
}

EXPORT nvmlReturn_t nvmlDeviceGetAttributes(nvmlDevice_t device, nvmlDeviceAttributes_t *attributes_)
{
    ENTER(nvmlDeviceGetAttributes);
    RETURN(attributes(F_nvmlDeviceGetAttributes, device, attributes_));
}

#if FAKENVML_PROFILE >= 535
/* A GPM sample of one GPU instance, taken through the parent GPU's handle. */
EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t gpmSample)
{
    ENTER(nvmlGpmMigSampleGet);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlGpmMigSampleGet, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (!gpm_sample_ok(gpmSample)) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    if (!g->gpm_supported) {
        RETURN(NVML_ERROR_NOT_SUPPORTED);
    }
    const mig_t *m = NULL;
    for (size_t i = 0; g->mig_mode && i < g->mig_count; i++) {
        if (g->migs[i].gpu_instance_id == gpuInstanceId) {
            m = &g->migs[i];
            break;
        }
    }
    if (m == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    gpmSample->taken = 1;
    gpmSample->device_index = (unsigned int)(g - g_state.gpus);
    gpmSample->timestamp_ns = now_ns(CLOCK_MONOTONIC);
    gpmSample->sm_util = m->gpm_sm_util;
    gpmSample->sm_occupancy = 0.0;
    gpmSample->dram_bw_util = 0.0;
    gpmSample->gpu_instance_id = gpuInstanceId;
    gpmSample->any_tensor_util = m->gpm_any_tensor_util;
    RETURN(NVML_SUCCESS);
}
#endif
#endif /* FAKENVML_PROFILE >= 450 */

/* ------------------------------------------------------------------------------------------ */
/* Health: remapped rows, retired pages, PCIe replays, violation time                         */
/* ------------------------------------------------------------------------------------------ */

#if FAKENVML_PROFILE >= 470
/* R450 came with the A100 and row remapping; the r470 profile stands for the branches from there. */
EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corrRows, unsigned int *uncRows,
                                              unsigned int *isPending, unsigned int *failureOccurred)
{
    ENTER(nvmlDeviceGetRemappedRows);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetRemappedRows, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (!g->row_remapping) {
        RETURN(NVML_ERROR_NOT_SUPPORTED);
    }
    if (corrRows == NULL || uncRows == NULL || isPending == NULL || failureOccurred == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    *corrRows = g->remapped_correctable;
    *uncRows = g->remapped_uncorrectable;
    *isPending = g->remapped_pending ? 1 : 0;
    *failureOccurred = g->remapped_failed ? 1 : 0;
    RETURN(NVML_SUCCESS);
}
#endif

/* Retired pages of one cause: the count, and as many addresses (and timestamps) as fit; made-up addresses one
 * 4 KiB page apart, double-bit ones above single-bit ones. */
static nvmlReturn_t retired_pages(fn_id f, nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                  unsigned int *pageCount, unsigned long long *addresses,
                                  unsigned long long *timestamps)
{
    gpu_t *g;
    nvmlReturn_t rc = begin_device(f, device, &g);
    if (rc != NVML_SUCCESS) {
        return rc;
    }
    if (!g->page_retirement) {
        return NVML_ERROR_NOT_SUPPORTED;
    }
    if (pageCount == NULL || cause >= NVML_PAGE_RETIREMENT_CAUSE_COUNT) {
        return NVML_ERROR_INVALID_ARGUMENT;
    }
    unsigned int have = cause == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS ? g->retired_single_bit
                                                                                            : g->retired_double_bit;
    if (addresses == NULL || *pageCount < have) {
        *pageCount = have;
        return have == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    unsigned long long base = cause == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS ? 0x1000ULL
                                                                                                 : 0x80000000ULL;
    for (unsigned int i = 0; i < have; i++) {
        addresses[i] = base + 0x1000ULL * i;
        if (timestamps != NULL) {
            timestamps[i] = 1700000000ULL + i;
        }
    }
    *pageCount = have;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                              unsigned int *pageCount, unsigned long long *addresses)
{
    ENTER(nvmlDeviceGetRetiredPages);
    RETURN(retired_pages(F_nvmlDeviceGetRetiredPages, device, cause, pageCount, addresses, NULL));
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages_v2(nvmlDevice_t device, nvmlPageRetirementCause_t cause,
                                                 unsigned int *pageCount, unsigned long long *addresses,
                                                 unsigned long long *timestamps)
{
    ENTER(nvmlDeviceGetRetiredPages_v2);
    RETURN(retired_pages(F_nvmlDeviceGetRetiredPages_v2, device, cause, pageCount, addresses, timestamps));
}

EXPORT nvmlReturn_t nvmlDeviceGetRetiredPagesPendingStatus(nvmlDevice_t device, nvmlEnableState_t *isPending)
{
    ENTER(nvmlDeviceGetRetiredPagesPendingStatus);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetRetiredPagesPendingStatus, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (!g->page_retirement) {
        RETURN(NVML_ERROR_NOT_SUPPORTED);
    }
    if (isPending == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    *isPending = g->retired_pending ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    RETURN(NVML_SUCCESS);
}

EXPORT nvmlReturn_t nvmlDeviceGetPcieReplayCounter(nvmlDevice_t device, unsigned int *value)
{
    ENTER(nvmlDeviceGetPcieReplayCounter);
    RETURN(get_uint_field(F_nvmlDeviceGetPcieReplayCounter, device, value, offsetof(gpu_t, pcie_replays)));
}

/* _v3 (32-character busId, eight-digit domain) is what every branch since R390 exports and pynvml calls; the
 * legacy four-digit form stays in busIdLegacy, as the real R580 answered (tests/data/captures/h100-*.nvml.json). */
EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci)
{
    ENTER(nvmlDeviceGetPciInfo_v3);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetPciInfo_v3, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (pci == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    unsigned int domain = 0, bus = 0, dev = 0, function = 0;
    if (sscanf(g->pci_bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &function) != 4) {
        RETURN(NVML_ERROR_UNKNOWN);
    }
    memset(pci, 0, sizeof(*pci));
    pci->domain = domain;
    pci->bus = bus;
    pci->device = dev;
    pci->pciDeviceId = g->pci_device_id;
    pci->pciSubSystemId = g->pci_subsystem_id;
    snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, domain & 0xFFFFu, bus,
             dev);
    snprintf(pci->busId, sizeof(pci->busId), NVML_DEVICE_PCI_BUS_ID_FMT, domain, bus, dev);
    RETURN(NVML_SUCCESS);
}

/* Policies 0-5 answer; 6 and 7 answered INVALID_ARGUMENT on the real H100 with R580
 * (tests/data/captures/h100-80gb-hbm3-r580-health.nvml.json), and so does anything else here. */
EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t perfPolicyType,
                                                 nvmlViolationTime_t *violTime)
{
    ENTER(nvmlDeviceGetViolationStatus);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetViolationStatus, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    const unsigned long long by_policy[] = {
        g->violation_power_ns,      g->violation_thermal_ns,         g->violation_sync_boost_ns,
        g->violation_board_limit_ns, g->violation_low_utilization_ns, g->violation_reliability_ns,
    };
    if (violTime == NULL || (unsigned int)perfPolicyType >= sizeof(by_policy) / sizeof(by_policy[0])) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    violTime->referenceTime = (unsigned long long)(now_ns(CLOCK_REALTIME) / 1000);
    violTime->violationTime = by_policy[perfPolicyType];
    RETURN(NVML_SUCCESS);
}

/* ------------------------------------------------------------------------------------------ */
/* Events: Xids from the state file's "xid" lines                                             */
/* ------------------------------------------------------------------------------------------ */

#define MAX_EVENT_SETS 16
#define EVENT_POLL_NS 5000000LL /* how often a wait looks at the state file again where inotify is refused */

/* An event set is an address in this array; what each GPU has registered, and how many of its Xids were there
 * already or have been delivered. */
struct nvmlEventSet_st {
    unsigned int in_use;
    unsigned long long types[MAX_GPUS];
    size_t seen[MAX_GPUS];
};
static struct nvmlEventSet_st g_event_sets[MAX_EVENT_SETS];

static struct nvmlEventSet_st *event_set(nvmlEventSet_t set)
{
    uintptr_t base = (uintptr_t)&g_event_sets[0];
    uintptr_t p = (uintptr_t)set;
    if (set == NULL || p < base || p >= base + sizeof(g_event_sets) || (p - base) % sizeof(g_event_sets[0])) {
        return NULL;
    }
    return set->in_use ? set : NULL;
}

EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    ENTER(nvmlDeviceGetSupportedEventTypes);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceGetSupportedEventTypes, device, &g);
    if (rc == NVML_SUCCESS) {
        if (eventTypes == NULL) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        } else {
            *eventTypes = g->event_types;
        }
    }
    RETURN(rc);
}

EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    ENTER(nvmlEventSetCreate);
    nvmlReturn_t rc = begin_system(F_nvmlEventSetCreate);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    if (set == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    for (int i = 0; i < MAX_EVENT_SETS; i++) {
        if (!g_event_sets[i].in_use) {
            memset(&g_event_sets[i], 0, sizeof(g_event_sets[i]));
            g_event_sets[i].in_use = 1;
            *set = &g_event_sets[i];
            RETURN(NVML_SUCCESS);
        }
    }
    RETURN(NVML_ERROR_MEMORY);
}

/* Real drivers refuse the whole registration when one type is not supported on the GPU. */
EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes, nvmlEventSet_t set)
{
    ENTER(nvmlDeviceRegisterEvents);
    gpu_t *g;
    nvmlReturn_t rc = begin_device(F_nvmlDeviceRegisterEvents, device, &g);
    if (rc != NVML_SUCCESS) {
        RETURN(rc);
    }
    struct nvmlEventSet_st *s = event_set(set);
    if (s == NULL) {
        RETURN(NVML_ERROR_INVALID_ARGUMENT);
    }
    if ((eventTypes & ~g->event_types) != 0) {
        RETURN(NVML_ERROR_NOT_SUPPORTED);
    }
    size_t index = (size_t)(g - g_state.gpus);
    if (s->types[index] == 0) {
        s->seen[index] = g->xid_count; /* only Xids after the registration are delivered */
    }
    s->types[index] |= eventTypes;
    RETURN(NVML_SUCCESS);
}

/* The next Xid not yet delivered on a GPU registered for Xids, or 0 when there is none. */
static int next_xid(struct nvmlEventSet_st *s, nvmlEventData_t *data, int with_instances)
{
    for (unsigned int i = 0; i < g_state.gpu_count; i++) {
        gpu_t *g = &g_state.gpus[i];
        if (!(s->types[i] & nvmlEventTypeXidCriticalError)) {
            continue;
        }
        if (s->seen[i] > g->xid_count) {
            s->seen[i] = g->xid_count; /* the state was rewritten with fewer */
        }
        if (s->seen[i] < g->xid_count) {
            data->device = &g_handles[i];
            data->eventType = nvmlEventTypeXidCriticalError;
            data->eventData = g->xids[s->seen[i]++];
            if (with_instances) {
                data->gpuInstanceId = NO_INSTANCE;
                data->computeInstanceId = NO_INSTANCE;
            }
            return 1;
        }
    }
    return 0;
}

/* Waits up to timeoutms for an event, letting go of the lock between looks, so other calls (from other threads,
 * as the real library allows) go on meanwhile; nothing within the time is TIMEOUT. */
/* An inotify descriptor on the directory of the state file, for a wait to sleep on until the tests rewrite the
 * file (they replace it by a rename), or -1. A real driver's wait blocks in the kernel and costs no CPU while no
 * event comes; polling the file every few milliseconds instead cost the waiting process 1.2 % of a core, which
 * every CPU measurement of gputop against the fake would count as gputop's own. */
static int watch_state_dir(void)
{
    const char *path = getenv("FAKE_NVML_STATE");
    char dir[PATH_MAX];
    if (path == NULL || path[0] == '\0' || strlen(path) >= sizeof(dir)) {
        return -1;
    }
    strcpy(dir, path);
    char *slash = strrchr(dir, '/');
    if (slash == NULL) {
        strcpy(dir, ".");
    } else if (slash == dir) {
        dir[1] = '\0';
    } else {
        *slash = '\0';
    }
    int fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    if (inotify_add_watch(fd, dir, IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Waits until the state file's directory changes or ``pause_ns`` pass; polls where inotify is refused. */
static void sleep_for_state(int fd, long long pause_ns)
{
    if (fd < 0) {
        long long pause = pause_ns < EVENT_POLL_NS ? pause_ns : EVENT_POLL_NS;
        struct timespec ts = {(time_t)(pause / 1000000000LL), (long)(pause % 1000000000LL)};
        nanosleep(&ts, NULL);
        return;
    }
    struct pollfd p = {fd, POLLIN, 0};
    int ms = (int)((pause_ns + 999999LL) / 1000000LL);
    if (poll(&p, 1, ms) > 0) {
        char buf[4096];
        while (read(fd, buf, sizeof(buf)) > 0) {
        }
    }
}

static nvmlReturn_t event_wait(fn_id f, nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms,
                               int with_instances)
{
    long long deadline = now_ns(CLOCK_MONOTONIC) + (long long)timeoutms * 1000000LL;
    /* Watched before the first look, so that a rewrite between the look and the sleep still wakes the sleep. */
    int fd = watch_state_dir();
    for (;;) {
        pthread_mutex_lock(&g_lock);
        call_counts[f]++;
        refresh_state();
        nvmlReturn_t rc = begin_system(f);
        struct nvmlEventSet_st *s = event_set(set);
        if (rc == NVML_SUCCESS && (s == NULL || data == NULL)) {
            rc = NVML_ERROR_INVALID_ARGUMENT;
        }
        if (rc == NVML_SUCCESS && !next_xid(s, data, with_instances)) {
            rc = NVML_ERROR_TIMEOUT;
        }
        pthread_mutex_unlock(&g_lock);
        long long now = now_ns(CLOCK_MONOTONIC);
        if (rc != NVML_ERROR_TIMEOUT || now >= deadline) {
            if (fd >= 0) {
                close(fd);
            }
            return rc;
        }
        sleep_for_state(fd, deadline - now);
    }
}

/* The legacy wait: its struct had no instance ids. */
EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    return event_wait(F_nvmlEventSetWait, set, data, timeoutms, 0);
}

#if FAKENVML_PROFILE >= 470
/* _v2 came with MIG (R450): the instance ids an Xid is attributed to. */
EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    return event_wait(F_nvmlEventSetWait_v2, set, data, timeoutms, 1);
}
#endif

EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    ENTER(nvmlEventSetFree);
    nvmlReturn_t rc = begin_system(F_nvmlEventSetFree);
    struct nvmlEventSet_st *s = event_set(set);
    if (rc == NVML_SUCCESS && s == NULL) {
        rc = NVML_ERROR_INVALID_ARGUMENT;
    }
    if (rc == NVML_SUCCESS) {
        memset(s, 0, sizeof(*s));
    }
    RETURN(rc);
}
