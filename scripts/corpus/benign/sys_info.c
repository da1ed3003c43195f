// maljan-corpus: prints the computer name, user, Windows version, CPU count and memory.
// link: -ladvapi32
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <stdio.h>

int main(void) {
    char name[256], user[256], product[256];
    DWORD n = sizeof name, u = sizeof user, p = sizeof product;
    GetComputerNameA(name, &n);
    GetUserNameA(user, &u);
    SYSTEM_INFO si;
    GetNativeSystemInfo(&si);
    MEMORYSTATUSEX mem = {.dwLength = sizeof mem};
    GlobalMemoryStatusEx(&mem);
    if (RegGetValueA(HKEY_LOCAL_MACHINE, "SOFTWARE\\Microsoft\\Windows NT\\CurrentVersion",
                     "ProductName", RRF_RT_REG_SZ, NULL, product, &p) != ERROR_SUCCESS)
        strcpy(product, "unknown");
    printf("computer: %s\nuser: %s\nwindows: %s\nprocessors: %lu\nmemory: %llu MiB\n", name, user,
           product, si.dwNumberOfProcessors, mem.ullTotalPhys >> 20);
    return 0;
}
