// maljan-corpus: lists a directory tree with sizes, like `dir /s`.
// link:
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <stdio.h>

static unsigned long long list(const char *dir, int depth) {
    char pattern[MAX_PATH], path[MAX_PATH];
    unsigned long long total = 0;
    snprintf(pattern, sizeof pattern, "%s\\*", dir);
    WIN32_FIND_DATAA fd;
    HANDLE h = FindFirstFileA(pattern, &fd);
    if (h == INVALID_HANDLE_VALUE) return 0;
    do {
        if (!strcmp(fd.cFileName, ".") || !strcmp(fd.cFileName, "..")) continue;
        snprintf(path, sizeof path, "%s\\%s", dir, fd.cFileName);
        if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) {
            printf("%*s%s\\\n", depth * 2, "", fd.cFileName);
            total += list(path, depth + 1);
        } else {
            unsigned long long size = ((unsigned long long)fd.nFileSizeHigh << 32) | fd.nFileSizeLow;
            printf("%*s%-40s %12llu\n", depth * 2, "", fd.cFileName, size);
            total += size;
        }
    } while (FindNextFileA(h, &fd));
    FindClose(h);
    return total;
}

int main(int argc, char **argv) {
    const char *root = argc > 1 ? argv[1] : ".";
    printf("total %llu bytes\n", list(root, 0));
    return 0;
}
