// maljan-corpus: classic DLL injection into another process through a remote thread.
// behaviour: process-injection
// imports: kernel32.dll!OpenProcess kernel32.dll!VirtualAllocEx kernel32.dll!WriteProcessMemory kernel32.dll!CreateRemoteThread kernel32.dll!GetProcAddress
// link:
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s PID DLL\n", argv[0]);
        return 2;
    }
    DWORD pid = (DWORD)strtoul(argv[1], NULL, 10);
    const char *dll = argv[2];
    SIZE_T len = strlen(dll) + 1;
    HANDLE proc = OpenProcess(PROCESS_CREATE_THREAD | PROCESS_VM_OPERATION | PROCESS_VM_WRITE |
                                  PROCESS_QUERY_INFORMATION,
                              FALSE, pid);
    if (!proc) return 1;
    LPVOID remote = VirtualAllocEx(proc, NULL, len, MEM_COMMIT | MEM_RESERVE, PAGE_READWRITE);
    if (!remote) return 1;
    if (!WriteProcessMemory(proc, remote, dll, len, NULL)) return 1;
    LPTHREAD_START_ROUTINE start = (LPTHREAD_START_ROUTINE)(void *)GetProcAddress(
        GetModuleHandleA("kernel32.dll"), "LoadLibraryA");
    HANDLE th = CreateRemoteThread(proc, NULL, 0, start, remote, 0, NULL);
    if (!th) return 1;
    WaitForSingleObject(th, INFINITE);
    CloseHandle(th);
    CloseHandle(proc);
    return 0;
}
