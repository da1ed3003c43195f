// maljan-corpus: a launcher that sets up DPI awareness (if the OS has it) and starts the real app.
// link:
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <stdio.h>
#include <string.h>

typedef HRESULT(WINAPI *SetDpi)(int);

int main(void) {
    HMODULE shcore = LoadLibraryA("shcore.dll");
    if (shcore) {
        SetDpi set = (SetDpi)(void *)GetProcAddress(shcore, "SetProcessDpiAwareness");
        if (set) set(2);
    }
    char dir[MAX_PATH], app[MAX_PATH + 32];
    GetModuleFileNameA(NULL, dir, MAX_PATH);
    char *slash = strrchr(dir, '\\');
    if (slash) *slash = 0;
    snprintf(app, sizeof app, "\"%s\\bin\\editor.exe\" --from-launcher", dir);
    STARTUPINFOA si = {.cb = sizeof si};
    PROCESS_INFORMATION pi;
    if (!CreateProcessA(NULL, app, NULL, NULL, FALSE, 0, NULL, dir, &si, &pi)) {
        MessageBoxA(NULL, "Cannot start bin\\editor.exe", "Launcher", MB_ICONERROR);
        return 1;
    }
    WaitForSingleObject(pi.hProcess, INFINITE);
    DWORD code = 0;
    GetExitCodeProcess(pi.hProcess, &code);
    return (int)code;
}
