// maljan-corpus: copies a file to another path, 64 KiB at a time, and reports the byte count.
// link:
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s SOURCE DEST\n", argv[0]);
        return 2;
    }
    HANDLE in = CreateFileA(argv[1], GENERIC_READ, FILE_SHARE_READ, NULL, OPEN_EXISTING, 0, NULL);
    if (in == INVALID_HANDLE_VALUE) { fprintf(stderr, "cannot open %s\n", argv[1]); return 1; }
    HANDLE out = CreateFileA(argv[2], GENERIC_WRITE, 0, NULL, CREATE_ALWAYS, 0, NULL);
    if (out == INVALID_HANDLE_VALUE) { fprintf(stderr, "cannot create %s\n", argv[2]); return 1; }
    static char buf[65536];
    DWORD got, put;
    unsigned long long total = 0;
    while (ReadFile(in, buf, sizeof buf, &got, NULL) && got) {
        if (!WriteFile(out, buf, got, &put, NULL) || put != got) return 1;
        total += got;
    }
    CloseHandle(in);
    CloseHandle(out);
    printf("copied %llu bytes\n", total);
    return 0;
}
