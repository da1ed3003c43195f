// maljan-corpus: downloads a web page with WinHTTP and prints it (like a tiny curl).
// link: -lwinhttp
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <winhttp.h>
#include <stdio.h>

int wmain(int argc, wchar_t **argv) {
    const wchar_t *host = argc > 1 ? argv[1] : L"www.debian.org";
    const wchar_t *path = argc > 2 ? argv[2] : L"/index.html";
    HINTERNET s = WinHttpOpen(L"corpus-fetch/1.0", WINHTTP_ACCESS_TYPE_DEFAULT_PROXY,
                              WINHTTP_NO_PROXY_NAME, WINHTTP_NO_PROXY_BYPASS, 0);
    HINTERNET c = s ? WinHttpConnect(s, host, INTERNET_DEFAULT_HTTPS_PORT, 0) : NULL;
    HINTERNET r = c ? WinHttpOpenRequest(c, L"GET", path, NULL, WINHTTP_NO_REFERER,
                                         WINHTTP_DEFAULT_ACCEPT_TYPES, WINHTTP_FLAG_SECURE) : NULL;
    if (!r || !WinHttpSendRequest(r, WINHTTP_NO_ADDITIONAL_HEADERS, 0, NULL, 0, 0, 0) ||
        !WinHttpReceiveResponse(r, NULL)) {
        fwprintf(stderr, L"request failed: %lu\n", GetLastError());
        return 1;
    }
    char buf[8192];
    DWORD got;
    while (WinHttpReadData(r, buf, sizeof buf, &got) && got) fwrite(buf, 1, got, stdout);
    WinHttpCloseHandle(r);
    WinHttpCloseHandle(c);
    WinHttpCloseHandle(s);
    return 0;
}
