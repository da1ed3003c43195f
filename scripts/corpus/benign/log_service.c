// maljan-corpus: a Windows service that writes a heartbeat line to its log file every minute.
// link: -ladvapi32
// Corpus data for the verdict benchmark: an ordinary program.
#include <windows.h>
#include <stdio.h>

static SERVICE_STATUS status;
static SERVICE_STATUS_HANDLE handle;
static HANDLE stop_event;

static void WINAPI control(DWORD code) {
    if (code == SERVICE_CONTROL_STOP) {
        status.dwCurrentState = SERVICE_STOP_PENDING;
        SetServiceStatus(handle, &status);
        SetEvent(stop_event);
    }
}

static void WINAPI service_main(DWORD argc, LPSTR *argv) {
    (void)argc; (void)argv;
    handle = RegisterServiceCtrlHandlerA("CorpusHeartbeat", control);
    status.dwServiceType = SERVICE_WIN32_OWN_PROCESS;
    status.dwControlsAccepted = SERVICE_ACCEPT_STOP;
    status.dwCurrentState = SERVICE_RUNNING;
    SetServiceStatus(handle, &status);
    stop_event = CreateEventA(NULL, TRUE, FALSE, NULL);
    HANDLE source = RegisterEventSourceA(NULL, "CorpusHeartbeat");
    do {
        SYSTEMTIME t;
        GetLocalTime(&t);
        FILE *log = fopen("C:\\ProgramData\\CorpusHeartbeat\\heartbeat.log", "a");
        if (log) {
            fprintf(log, "%04u-%02u-%02u %02u:%02u:%02u alive\n", t.wYear, t.wMonth, t.wDay,
                    t.wHour, t.wMinute, t.wSecond);
            fclose(log);
        }
        const char *msg = "heartbeat";
        ReportEventA(source, EVENTLOG_INFORMATION_TYPE, 0, 1, NULL, 1, 0, &msg, NULL);
    } while (WaitForSingleObject(stop_event, 60000) == WAIT_TIMEOUT);
    DeregisterEventSource(source);
    status.dwCurrentState = SERVICE_STOPPED;
    SetServiceStatus(handle, &status);
}

int main(void) {
    SERVICE_TABLE_ENTRYA table[] = {{"CorpusHeartbeat", service_main}, {NULL, NULL}};
    return StartServiceCtrlDispatcherA(table) ? 0 : 1;
}
