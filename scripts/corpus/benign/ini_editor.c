// maljan-corpus: reads and writes a key of an .ini file (GetPrivateProfileString).
// link:
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <stdio.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s FILE SECTION KEY [VALUE]\n", argv[0]);
        return 2;
    }
    char full[MAX_PATH];
    GetFullPathNameA(argv[1], MAX_PATH, full, NULL);
    if (argc > 4) return WritePrivateProfileStringA(argv[2], argv[3], argv[4], full) ? 0 : 1;
    char value[1024];
    GetPrivateProfileStringA(argv[2], argv[3], "", value, sizeof value, full);
    puts(value);
    return 0;
}
