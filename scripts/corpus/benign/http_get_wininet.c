// maljan-corpus: saves a URL to a file with WinINet, showing progress.
// link: -lwininet
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <wininet.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s URL FILE\n", argv[0]);
        return 2;
    }
    HINTERNET net = InternetOpenA("corpus-wget/1.0", INTERNET_OPEN_TYPE_PRECONFIG, NULL, NULL, 0);
    HINTERNET url = InternetOpenUrlA(net, argv[1], NULL, 0, INTERNET_FLAG_RELOAD, 0);
    if (!url) { fprintf(stderr, "cannot open %s\n", argv[1]); return 1; }
    FILE *out = fopen(argv[2], "wb");
    if (!out) return 1;
    char buf[16384];
    DWORD got;
    unsigned long total = 0;
    while (InternetReadFile(url, buf, sizeof buf, &got) && got) {
        fwrite(buf, 1, got, out);
        total += got;
        fprintf(stderr, "\r%lu bytes", total);
    }
    fclose(out);
    InternetCloseHandle(url);
    InternetCloseHandle(net);
    fprintf(stderr, "\nsaved %s\n", argv[2]);
    return 0;
}
