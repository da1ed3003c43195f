// maljan-corpus: refuses to run under a debugger or in a virtual machine.
// behaviour: anti-analysis
// imports: kernel32.dll!IsDebuggerPresent kernel32.dll!CheckRemoteDebuggerPresent kernel32.dll!CreateToolhelp32Snapshot kernel32.dll!Process32First advapi32.dll!RegOpenKeyExA kernel32.dll!GetTickCount
// link: -ladvapi32
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <tlhelp32.h>
#include <cpuid.h>
#include <string.h>

typedef LONG(NTAPI *NtQIP)(HANDLE, ULONG, PVOID, ULONG, PULONG);

static int debugged(void) {
    BOOL remote = FALSE;
    if (IsDebuggerPresent()) return 1;
    CheckRemoteDebuggerPresent(GetCurrentProcess(), &remote);
    if (remote) return 1;
    NtQIP q = (NtQIP)(void *)GetProcAddress(GetModuleHandleA("ntdll.dll"),
                                             "NtQueryInformationProcess");
    DWORD_PTR port = 0;
    if (q && q(GetCurrentProcess(), 7 /* ProcessDebugPort */, &port, sizeof port, NULL) == 0 && port)
        return 1;
    DWORD t = GetTickCount();
    Sleep(500);
    return GetTickCount() - t < 450; /* sleep skipped by a sandbox */
}

static int virtual_machine(void) {
    unsigned a, b, c, d;
    char vendor[13] = {0};
    __cpuid(1, a, b, c, d);
    if (c & (1u << 31)) return 1; /* hypervisor present */
    __cpuid(0x40000000, a, b, c, d);
    memcpy(vendor, &b, 4); memcpy(vendor + 4, &c, 4); memcpy(vendor + 8, &d, 4);
    if (!strcmp(vendor, "VMwareVMware") || !strcmp(vendor, "VBoxVBoxVBox") ||
        !strcmp(vendor, "Microsoft Hv") || !strcmp(vendor, "KVMKVMKVM"))
        return 1;
    HKEY k;
    if (RegOpenKeyExA(HKEY_LOCAL_MACHINE, "SOFTWARE\\Oracle\\VirtualBox Guest Additions", 0,
                      KEY_READ, &k) == ERROR_SUCCESS)
        return 1;
    if (GetFileAttributesA("C:\\Windows\\System32\\drivers\\vmmouse.sys") != INVALID_FILE_ATTRIBUTES ||
        GetFileAttributesA("C:\\Windows\\System32\\drivers\\VBoxGuest.sys") != INVALID_FILE_ATTRIBUTES)
        return 1;
    static const char *tools[] = {"vboxservice.exe", "vmtoolsd.exe", "vmwaretray.exe",
                                  "wireshark.exe", "procmon.exe", "x64dbg.exe", "ollydbg.exe"};
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
    PROCESSENTRY32 pe = {.dwSize = sizeof pe};
    for (BOOL ok = Process32First(snap, &pe); ok; ok = Process32Next(snap, &pe))
        for (unsigned i = 0; i < sizeof tools / sizeof *tools; i++)
            if (!_stricmp(pe.szExeFile, tools[i])) return 1;
    CloseHandle(snap);
    return 0;
}

int main(void) {
    if (debugged() || virtual_machine()) ExitProcess(0);
    MessageBeep(MB_OK);
    return 0;
}
