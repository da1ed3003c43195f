// maljan-corpus: keeps an application's window size in its own registry key under HKCU\Software.
// link: -ladvapi32
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <stdio.h>
#include <stdlib.h>

#define KEY "Software\\CorpusTools\\Notepad Lite\\Settings"

int main(int argc, char **argv) {
    HKEY key;
    if (RegCreateKeyExA(HKEY_CURRENT_USER, KEY, 0, NULL, 0, KEY_READ | KEY_WRITE, NULL, &key, NULL))
        return 1;
    DWORD width = 800, size = sizeof width;
    RegQueryValueExA(key, "WindowWidth", NULL, NULL, (BYTE *)&width, &size);
    printf("current width: %lu\n", width);
    if (argc > 1) {
        width = strtoul(argv[1], NULL, 10);
        RegSetValueExA(key, "WindowWidth", 0, REG_DWORD, (const BYTE *)&width, sizeof width);
        const char *font = "Consolas";
        RegSetValueExA(key, "Font", 0, REG_SZ, (const BYTE *)font, 9);
    }
    RegCloseKey(key);
    return 0;
}
