pragma solidity >=0.8.0;

interface IRemoteChallenger {
    int32_t get_remote_id();
    int32_t get_remote_name();
    int32_t get_remote_type();
    int32_t get_remote_type_name();
    int32_t get_remote_type_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_name_name();
    int32_t get_remote_type_