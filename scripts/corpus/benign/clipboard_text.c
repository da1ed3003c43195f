// maljan-corpus: prints the text on the clipboard, or puts standard input on it with --set.
// link: -luser32
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (!OpenClipboard(NULL)) return 1;
    if (argc > 1 && !strcmp(argv[1], "--set")) {
        static char text[65536];
        size_t n = fread(text, 1, sizeof text - 1, stdin);
        HGLOBAL mem = GlobalAlloc(GMEM_MOVEABLE, n + 1);
        memcpy(GlobalLock(mem), text, n + 1);
        GlobalUnlock(mem);
        EmptyClipboard();
        SetClipboardData(CF_TEXT, mem);
    } else {
        HANDLE data = GetClipboardData(CF_TEXT);
        if (data) {
            fputs((const char *)GlobalLock(data), stdout);
            GlobalUnlock(data);
        }
    }
    CloseClipboard();
    return 0;
}
